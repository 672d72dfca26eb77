// IPC and keys across the job's boundary.
//
// SysV IPC and POSIX message queues live in an IPC namespace, POSIX shared
// memory in /dev/shm: each job gets its own of both, so the objects of
// processes outside are not refused but absent (ENOENT, no audit line: the
// control proves they exist), and the job's own die with it.
//
// Keys are one namespace for the whole machine, reached by serial: a job
// may use only the keys it created (refused otherwise, with a `key` audit
// line), and starts with a fresh session keyring of its own.
#include <fcntl.h>
#include <fmt/format.h>
#include <mqueue.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/keyctl.h>

#include <map>
#include <regex>
#include <sstream>

#include "harness.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;

// SysV keys no other test uses: this run's pid, and a counter.
key_t next_key() {
    static int n = 0;
    return static_cast<key_t>(0x7c000000 | ((getpid() & 0xffff) << 8) | (++n & 0xff));
}
std::string hex(key_t k) {
    return fmt::format("{:x}", static_cast<unsigned>(k));
}

// The SysV objects and POSIX names of one test, in the guest's own (the
// host's) IPC namespace, removed at the end whoever made them.
struct IpcObjects {
    key_t shm = next_key(), msg = next_key(), sem = next_key();
    std::string mq = fmt::format("/confine-test-mq-{}-{}", getpid(), shm & 0xff);
    std::string pshm = fmt::format("/confine-test-shm-{}-{}", getpid(), shm & 0xff);

    // What `vmhelper` does to make or read all of them.
    std::string make_ops(const std::string& text) const {
        return fmt::format("shm,make,{0},{4} msg,make,{1},{4} sem,make,{2},42 mq,make,{3},{4}", hex(shm), hex(msg),
                           hex(sem), mq, text);
    }
    std::string read_ops() const {
        return fmt::format("shm,read,{} msg,read,{} sem,read,{} mq,read,{}", hex(shm), hex(msg), hex(sem), mq);
    }
    std::vector<std::string> read_op_names() const {
        std::istringstream in(read_ops());
        std::vector<std::string> out;
        for (std::string s; in >> s;) out.push_back(s);
        return out;
    }

    // Which of them exist here (outside every job); "" if none.
    std::string existing() const {
        std::string s;
        if (shmget(shm, 0, 0) >= 0) s += " shm";
        if (msgget(msg, 0) >= 0) s += " msg";
        if (semget(sem, 0, 0) >= 0) s += " sem";
        mqd_t q = mq_open(mq.c_str(), O_RDONLY);
        if (q != static_cast<mqd_t>(-1)) {
            s += " mq";
            mq_close(q);
        }
        if (exists("/dev/shm" + pshm)) s += " pshm";
        return s;
    }
    void remove() const {
        if (int id = shmget(shm, 0, 0); id >= 0) shmctl(id, IPC_RMID, nullptr);
        if (int id = msgget(msg, 0); id >= 0) msgctl(id, IPC_RMID, nullptr);
        if (int id = semget(sem, 0, 0); id >= 0) semctl(id, 0, IPC_RMID);
        mq_unlink(mq.c_str());
        unlink(("/dev/shm" + pshm).c_str());
    }
    ~IpcObjects() { remove(); }
};

// Whether a /proc/sysvipc listing has an object of this key (decimal, the
// first column).
bool listed(const std::string& listing, key_t key) {
    return std::regex_search(listing, std::regex(fmt::format(R"((^|\n) *{} )", key)));
}

// ---- keys ----

// Each OP in a process of its own, so that each has its own audit
// lines: OP -> its pid and result.
struct OpResult {
    pid_t pid = -1;
    std::string result = "(not run)";
};
std::string each_op(const std::vector<std::string>& ops) {
    std::string cmd;
    for (const auto& op : ops) cmd += "./vmhelper '" + op + "'; ";
    return cmd;
}
std::map<std::string, OpResult> parse_each(const std::string& out) {
    std::map<std::string, OpResult> m;
    // Each process's lines, from its "pid N" line on.
    auto add = [&](const std::string& lines) {
        Ops o = parse_ops(lines);
        for (const auto& [op, result] : o.results) m[op] = {o.pids.empty() ? -1 : o.pids[0], result};
    };
    std::istringstream in(out);
    std::string one;
    for (std::string l; std::getline(in, l);) {
        if (l.starts_with("pid ")) {
            add(one);
            one.clear();
        }
        one += l + "\n";
    }
    add(one);
    return m;
}
// The serial of an "ok SERIAL" result; 0 if it isn't one.
long serial_of(const std::string& result) {
    return result.starts_with("ok ") ? std::strtol(result.c_str() + 3, nullptr, 10) : 0;
}

class IpcTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        helper_ = install_helper(work());
    }
    // Keys of the account outlive the test: the account invalidates them.
    void TearDown() override {
        for (long k : keys_) run_unconfined(fmt::format("./vmhelper key,invalidate,{}", k));
    }
    void invalidate_at_end(long serial) { keys_.push_back(serial); }

    std::string helper_;
    std::vector<long> keys_;
};

// ---- SysV IPC and POSIX message queues ------------------------------------------

TEST_F(IpcTest, IpcObjectsOutsideTheJobAreInvisible) {
    IpcObjects objs;
    Result made =
        run_unconfined("./vmhelper " + objs.make_ops("ipc-secret") + " pshm,make," + objs.pshm + ",ipc-secret");
    ASSERT_EQ(made.status, 0) << made.describe();
    ASSERT_EQ(objs.existing(), " shm msg sem mq pshm") << made.describe();

    const std::string cmd = "./vmhelper " + objs.read_ops() + " pshm,read," + objs.pshm +
                            "; cat /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem";
    Result control = run_unconfined(cmd);
    Ops c = parse_ops(control.out);
    for (const auto& op : objs.read_op_names())
        EXPECT_EQ(c[op], op.starts_with("sem") ? "ok 42" : "ok ipc-secret") << op << "\n" << control.describe();
    EXPECT_EQ(c["pshm,read," + objs.pshm], "ok ipc-secret") << control.describe();
    for (key_t k : {objs.shm, objs.msg, objs.sem}) EXPECT_TRUE(listed(control.out, k)) << k << "\n" << control.out;
    ASSERT_FALSE(HasFailure());

    Result r = run_confined("", cmd);
    Ops o = parse_ops(r.out);
    EXPECT_EQ(o[fmt::format("shm,read,{}", hex(objs.shm))], "shmget:ENOENT") << r.describe();
    EXPECT_EQ(o[fmt::format("msg,read,{}", hex(objs.msg))], "msgget:ENOENT") << r.describe();
    EXPECT_EQ(o[fmt::format("sem,read,{}", hex(objs.sem))], "semget:ENOENT") << r.describe();
    EXPECT_EQ(o["mq,read," + objs.mq], "mq_open:ENOENT") << r.describe();
    EXPECT_EQ(o["pshm,read," + objs.pshm], "shm_open:ENOENT") << r.describe();
    for (key_t k : {objs.shm, objs.msg, objs.sem}) EXPECT_FALSE(listed(r.out, k)) << k << "\n" << r.describe();
    EXPECT_NE(r.out.find("perms"), npos) << "the job could not read /proc/sysvipc\n" << r.describe();
    EXPECT_TRUE(r.audit.empty()) << r.describe();
    EXPECT_EQ(objs.existing(), " shm msg sem mq pshm") << "the job changed objects outside it";
}

// A mount of the mqueue file system names the queues of the IPC namespace
// that mounted it, whichever namespace opens it later: where the machine
// mounts one (systemd does, on /dev/mqueue), the job's copy of the mount
// table still shows the outside queues. /dev/mqueue is not in the default
// policy: no look, no new queue there.
TEST_F(IpcTest, TheHostsMqueueMountIsOutOfReach) {
    const std::string dir = "/dev/mqueue";
    mkdir(dir.c_str(), 01777);
    struct Unmount {
        bool mounted = false;
        ~Unmount() {
            if (mounted) umount2("/dev/mqueue", MNT_DETACH);
        }
    } unmount;
    if (read_file("/proc/self/mountinfo").find(" /dev/mqueue ") == npos) {
        ASSERT_EQ(mount("mqueue", dir.c_str(), "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr), 0)
            << strerror(errno);
        unmount.mounted = true;
    }
    IpcObjects objs;
    Result made = run_unconfined("./vmhelper mq,make," + objs.mq + ",ipc-secret");
    ASSERT_EQ(made.status, 0) << made.describe();
    const std::string queue = dir + objs.mq, made_here = dir + objs.mq + "-new";
    struct Remove {
        std::string path;
        ~Remove() { unlink(path.c_str()); }
    } remove{made_here};

    auto cmd = [&](const std::string& fresh) {
        return fmt::format("cat {}; r=$?; true > {}; echo \"read=$r create=$?\"", queue, fresh);
    };
    Result control = run_unconfined(cmd(made_here));
    EXPECT_NE(control.out.find("QSIZE:10"), npos) << control.describe();
    EXPECT_NE(control.out.find("read=0 create=0"), npos) << control.describe();
    EXPECT_TRUE(exists(made_here));
    unlink(made_here.c_str());
    ASSERT_FALSE(HasFailure());

    Result r = run_confined("", cmd(made_here));
    EXPECT_EQ(r.out.find("QSIZE"), npos) << r.describe();
    EXPECT_NE(r.out.find("read=1 create=2"), npos) << r.describe();
    EXPECT_FALSE(exists(made_here)) << "the job made a queue outside its IPC namespace";
    EXPECT_DENIAL(r, "open_read", queue, "cat");
    bool create_refused = false;
    for (const auto& l : r.audit)
        if (l.str("target") == made_here && (l.str("op") == "create" || l.str("op") == "open_write"))
            create_refused = true;
    EXPECT_TRUE(create_refused) << r.describe();
}

// What a job makes dies with it: nothing of it is left for a later job (or
// any other process) to read.
TEST_F(IpcTest, IpcObjectsOfTheJobDieWithIt) {
    IpcObjects objs;
    const std::string cmd = "./vmhelper " + objs.make_ops("left-behind") + " pshm,make," + objs.pshm + ",left-behind " +
                            objs.read_ops() + " pshm,read," + objs.pshm + "; cat /proc/sysvipc/shm";

    Result control = run_unconfined(cmd);
    EXPECT_EQ(control.status, 0) << control.describe();
    EXPECT_EQ(objs.existing(), " shm msg sem mq pshm") << "unconfined, the objects should outlive their maker\n"
                                                       << control.describe();
    objs.remove();
    ASSERT_EQ(objs.existing(), "");
    ASSERT_FALSE(HasFailure());

    Result r = run_confined("", cmd);
    EXPECT_EQ(r.status, 0) << r.describe();
    Ops o = parse_ops(r.out);
    for (const auto& op : objs.read_op_names())
        EXPECT_EQ(o[op], op.starts_with("sem") ? "ok 42" : "ok left-behind") << op << "\n" << r.describe();
    EXPECT_EQ(o["pshm,read," + objs.pshm], "ok left-behind") << r.describe();
    EXPECT_TRUE(listed(r.out, objs.shm)) << "the job's own segment should be listed inside it\n" << r.describe();
    EXPECT_EQ(objs.existing(), "") << "left behind by the job";
    EXPECT_TRUE(r.audit.empty()) << r.describe();
}

// Two jobs at once share nothing either.
TEST_F(IpcTest, ConcurrentJobsShareNoIpc) {
    IpcObjects objs;
    const std::string make =
        "./vmhelper " + objs.make_ops("job-one") + " pshm,make," + objs.pshm + ",job-one touch,ready wait,release";
    const std::string read = "./vmhelper " + objs.read_ops() + " pshm,read," + objs.pshm;

    {
        Process maker = start_unconfined(make);
        ASSERT_TRUE(wait_until([&] { return exists(work() + "/ready"); }, 60)) << maker.wait(1).describe();
        Result control = run_unconfined(read);
        EXPECT_EQ(control.status, 0) << control.describe();
        write_file(work() + "/release", "");
        EXPECT_EQ(maker.wait().status, 0);
        objs.remove();
        unlink((work() + "/ready").c_str());
        unlink((work() + "/release").c_str());
        ASSERT_FALSE(HasFailure());
    }

    Started one = start({.argv = {"/bin/sh", "-c", make}});
    ASSERT_TRUE(wait_until([&] { return exists(work() + "/ready"); }, 60)) << finish(one, 1).describe();
    Result two = run_confined("", read);
    write_file(work() + "/release", "");
    Result first = finish(one);
    EXPECT_EQ(first.status, 0) << first.describe();
    Ops o = parse_ops(two.out);
    EXPECT_EQ(o[fmt::format("shm,read,{}", hex(objs.shm))], "shmget:ENOENT") << two.describe();
    EXPECT_EQ(o[fmt::format("msg,read,{}", hex(objs.msg))], "msgget:ENOENT") << two.describe();
    EXPECT_EQ(o[fmt::format("sem,read,{}", hex(objs.sem))], "semget:ENOENT") << two.describe();
    EXPECT_EQ(o["mq,read," + objs.mq], "mq_open:ENOENT") << two.describe();
    EXPECT_EQ(o["pshm,read," + objs.pshm], "shm_open:ENOENT") << two.describe();
    EXPECT_TRUE(two.audit.empty()) << two.describe();
    EXPECT_EQ(objs.existing(), "");
}

// ---- keys ---------------------------------------------------------------------

// The account's user keyring (@u), which outlives every process, holds a
// secret. A job reaches @u (and @us) only through the user namespace's
// register of user keyrings (".user_reg"), whose search is refused: every
// look-up of @u fails there, and the kernel reports ENOKEY. A key of @u
// named by its serial is refused itself.
TEST_F(IpcTest, TheAccountsUserKeyringIsOutOfReach) {
    const std::string desc = fmt::format("confine-test-{}-user", getpid());
    Result made = run_unconfined(fmt::format("./vmhelper key,add,@u,{},key-secret key,id,@u", desc));
    Ops m = parse_ops(made.out);
    const long key = serial_of(m[fmt::format("key,add,@u,{},key-secret", desc)]);
    const long user_ring = serial_of(m["key,id,@u"]);
    ASSERT_GT(key, 0) << made.describe();
    ASSERT_GT(user_ring, 0) << made.describe();
    invalidate_at_end(key);
    // Open to every process of the account: only confine stands between
    // the job and the key (the job doesn't possess it, having a session
    // keyring of its own, and the kernel checks the "user" permissions).
    Result opened = run_unconfined(fmt::format("./vmhelper key,setperm,{},3f3f3f3f", key));
    ASSERT_EQ(opened.status, 0) << opened.describe();

    struct Way {
        std::string op, control, denied;
        long target;  // the serial the audit line names; 0: the register
    };
    const std::string k = std::to_string(key);
    const std::vector<Way> ways = {
        {"key,read," + k, "ok key-secret", "keyctl:ENOKEY", key},
        {"key,describe," + k, fmt::format("ok user;{0};{1};3f3f3f3f;{2}", test_user().uid, test_user().gid, desc),
         "keyctl:EACCES", key},
        {"key,link," + k + ",@p", "ok", "keyctl:EACCES", key},
        {"key,setperm," + k + ",3f3f3f3f", "ok", "keyctl:EACCES", key},
        {"key,search,@u," + desc, "ok " + k, "keyctl:ENOKEY", 0},
        {"key,list,@u", "ok " + k, "keyctl:ENOKEY", 0},
        {"key,id,@u", "ok " + std::to_string(user_ring), "keyctl:ENOKEY", 0},
        {"key,id,@us", "", "keyctl:ENOKEY", 0},
        {"key,add,@u," + desc + "-job,job-data", "", "add_key:ENOKEY", 0},
    };
    std::vector<std::string> ops;
    for (const auto& w : ways) ops.push_back(w.op);

    // The control changes nothing the confined run depends on: the link
    // goes to the control's own process keyring, the permissions stay as
    // they are, and the key it adds is removed.
    Result control = run_unconfined(each_op(ops));
    auto c = parse_each(control.out);
    for (const auto& w : ways) {
        if (w.control.empty()) {
            EXPECT_TRUE(c[w.op].result.starts_with("ok")) << w.op << "\n" << control.describe();
        } else {
            EXPECT_EQ(c[w.op].result, w.control) << w.op << "\n" << control.describe();
        }
    }
    if (long added = serial_of(c[ways.back().op].result))
        run_unconfined(fmt::format("./vmhelper key,invalidate,{}", added));
    ASSERT_FALSE(HasFailure());

    Result r = run_confined("", each_op(ops));
    auto o = parse_each(r.out);
    std::string user_reg_target;
    for (const auto& w : ways) {
        SCOPED_TRACE(w.op);
        EXPECT_EQ(o[w.op].result, w.denied) << r.describe();
        Result mine = of_process(r, o[w.op].pid);
        ASSERT_EQ(mine.audit.size(), 1u) << r.describe();
        const AuditLine& l = mine.audit[0];
        if (w.target) {
            EXPECT_DENIAL(mine, "key", fmt::format("key:{}", w.target), "vmhelper");
            EXPECT_EQ(l.str("description"), desc) << l.raw;
        } else {
            EXPECT_DENIAL(mine, "key", l.str("target").value_or("?"), "vmhelper");
            EXPECT_EQ(l.str("description"), ".user_reg") << l.raw;
            if (user_reg_target.empty()) user_reg_target = l.str("target").value_or("");
            EXPECT_EQ(l.str("target"), user_reg_target) << l.raw;
        }
    }
    EXPECT_EQ(r.audit.size(), ways.size()) << r.describe();
}

// The session keyring confine runs in (root's, or the caller's login
// session) is not the job's: it gets a fresh, empty one, in which its own
// keys work.
TEST_F(IpcTest, TheJobHasAFreshSessionKeyringOfItsOwn) {
    const long confines = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
    Result control = run_unconfined("./vmhelper key,id,@s");
    const long users = serial_of(parse_ops(control.out)["key,id,@s"]);
    ASSERT_GT(users, 0) << control.describe();

    const std::string cmd =
        "./vmhelper key,id,@s key,list,@s key,describe,@s; "
        "s=$(./vmhelper key,add,@s,mine,my-secret | sed -n 's/^[0-9]* key,add.* -> ok //p'); "
        "./vmhelper key,read,$s key,search,@s,mine key,list,@s key,setperm,$s,3f3f0000";
    Result r = run_confined("", cmd);
    Ops o = parse_ops(r.out);
    const long ring = serial_of(o["key,id,@s"]);
    EXPECT_GT(ring, 0) << r.describe();
    EXPECT_NE(ring, confines) << r.describe();
    EXPECT_NE(ring, users) << r.describe();
    EXPECT_EQ(o["key,list,@s"], "ok " + std::to_string(serial_of(o["key,search,@s,mine"]))) << r.describe();
    EXPECT_TRUE(o["key,describe,@s"].starts_with(fmt::format("ok keyring;{};", test_user().uid))) << r.describe();
    EXPECT_TRUE(o["key,describe,@s"].ends_with(";_ses")) << r.describe();
    EXPECT_NE(r.out.find(" -> ok my-secret\n"), npos) << r.describe();
    EXPECT_GT(serial_of(o["key,search,@s,mine"]), 0) << r.describe();
    EXPECT_NE(r.out.find(",3f3f0000 -> ok\n"), npos) << r.describe();
    EXPECT_TRUE(r.audit.empty()) << r.describe();
    // Empty when the job started: its first listing came before the add.
    EXPECT_NE(r.out.find("key,list,@s -> ok\n"), npos) << r.describe();

    Result again = run_confined("", "./vmhelper key,id,@s");
    const long ring2 = serial_of(parse_ops(again.out)["key,id,@s"]);
    EXPECT_GT(ring2, 0) << again.describe();
    EXPECT_NE(ring2, ring) << "two jobs share a session keyring";
}

// A key one job makes readable to the whole account (setperm) is still out
// of reach of a job running beside it, and gone once its job ends.
TEST_F(IpcTest, KeysOfOneJobAreOutOfReachOfAnother) {
    const std::string desc = fmt::format("confine-test-{}-job", getpid());
    write_file(work() + "/first.sh",
               fmt::format("s=$(./vmhelper key,add,@s,{},job-secret | sed -n 's/^[0-9]* key,add.* -> ok //p')\n"
                           "./vmhelper key,setperm,$s,3f3f3f3f key,link,$s,@u\n"
                           "echo $s > serial\ntouch ready\n./vmhelper wait,release\n",
                           desc));
    const std::string first = "sh first.sh";
    // The control in a session keyring of its own too, as confine gives a
    // job (KEYCTL_JOIN_SESSION_KEYRING is keyctl 1 = syscall 250 on
    // x86-64): else each process makes a session keyring its own at its
    // first add to @s.
    const std::string first_unconfined =
        "/usr/bin/python3 -c 'import ctypes, os; ctypes.CDLL(None).syscall(250, 1, None); "
        "os.execv(\"/bin/sh\", [\"sh\", \"first.sh\"])'";
    auto serial = [&] { return std::strtol(read_file(work() + "/serial").c_str(), nullptr, 10); };
    auto reset = [&] {
        for (const char* f : {"/serial", "/ready", "/release"}) unlink((work() + f).c_str());
    };

    {
        Process one = start_unconfined(first_unconfined);
        ASSERT_TRUE(wait_until([&] { return exists(work() + "/ready"); }, 60)) << one.wait(1).describe();
        const long key = serial();
        Result control = run_unconfined(fmt::format("./vmhelper key,read,{}", key));
        EXPECT_EQ(parse_ops(control.out)[fmt::format("key,read,{}", key)], "ok job-secret") << control.describe();
        write_file(work() + "/release", "");
        Result done = one.wait();
        EXPECT_NE(done.out.find(fmt::format("key,link,{},@u -> ok", key)), npos) << done.describe();
        invalidate_at_end(key);
        reset();
        ASSERT_FALSE(HasFailure());
    }

    Started one = start({.argv = {"/bin/sh", "-c", first}});
    ASSERT_TRUE(wait_until([&] { return exists(work() + "/ready"); }, 60)) << finish(one, 1).describe();
    const long key = serial();
    ASSERT_GT(key, 0);
    const std::string k = std::to_string(key);
    const std::vector<std::pair<std::string, std::string>> ways = {
        {"key,read," + k, "keyctl:ENOKEY"},
        {"key,describe," + k, "keyctl:EACCES"},
        {"key,link," + k + ",@s", "keyctl:EACCES"},
        {"key,setperm," + k + ",3f3f3f3f", "keyctl:EACCES"},
    };
    std::vector<std::string> ops;
    for (const auto& [op, denied] : ways) ops.push_back(op);
    Result two = run_confined("", each_op(ops));
    write_file(work() + "/release", "");
    Result first_done = finish(one);
    EXPECT_EQ(first_done.status, 0) << first_done.describe();
    // The first job can't hand its key to the account either.
    EXPECT_NE(first_done.out.find(fmt::format("key,link,{},@u -> keyctl:ENOKEY", key)), npos) << first_done.describe();

    auto o = parse_each(two.out);
    for (const auto& [op, denied] : ways) {
        SCOPED_TRACE(op);
        EXPECT_EQ(o[op].result, denied) << two.describe();
        Result mine = of_process(two, o[op].pid);
        EXPECT_DENIAL(mine, "key", "key:" + k, "vmhelper");
        for (const auto& l : mine.audit) EXPECT_EQ(l.str("description"), desc) << l.raw;
    }
    EXPECT_EQ(two.audit.size(), ways.size()) << two.describe();

    // Once its job is gone, so is the key: nothing for the next job.
    Result three = run_confined("", "./vmhelper key,read," + k);
    EXPECT_EQ(parse_ops(three.out)["key,read," + k], "keyctl:ENOKEY") << three.describe();
    for (const auto& l : three.audit) EXPECT_EQ(l.str("target"), "key:" + k) << l.raw;
}

// The persistent keyring (KEYCTL_GET_PERSISTENT) outlives sessions like @u.
TEST_F(IpcTest, ThePersistentKeyringIsRefused) {
    Result control = run_unconfined("./vmhelper key,persistent");
    const long ring = serial_of(parse_ops(control.out)["key,persistent"]);
    ASSERT_GT(ring, 0) << "no persistent keyring unconfined (CONFIG_PERSISTENT_KEYRINGS?)\n" << control.describe();

    Result r = run_confined("", "./vmhelper key,persistent");
    EXPECT_EQ(parse_ops(r.out)["key,persistent"], "keyctl:EACCES") << r.describe();
    EXPECT_DENIAL(r, "key", fmt::format("key:{}", ring), "vmhelper");
    for (const auto& l : r.audit)
        EXPECT_EQ(l.str("description"), fmt::format("_persistent.{}", test_user().uid)) << l.raw;
    EXPECT_EQ(r.audit.size(), 1u) << r.describe();
}

}  // namespace
}  // namespace vmtest
