// confine_vm_helper: what a job does in the VM tests, one system call at a
// time, with exact errno reporting and fast start-up (python takes seconds
// under TCG).
//
//   vmhelper [--op-comm] OP...     runs each OP in turn, in this one process
//   vmhelper fsrace,LINK,A,B,READPATH,SECONDS
//   vmhelper victims,N,FILE
//
// Every OP is one argument: its name, then its fields, separated by commas
// (no field holds a comma; a list inside a field, such as open's flags, is
// joined by '+'). Commas need no quoting in a shell command, so an OP
// passes through `sh -c` strings as it is.
//
// The runner prints "pid N" (this process), then one line per OP:
//   I OP -> ok[ DETAIL]          the OP worked (DETAIL: what it read or found)
//   I OP -> CALL:ERRNO_NAME      the call that failed, and its errno
// where I counts the OPs from 0 and OP is the argument as given. A result
// may also be CALL:WHAT for a failure with no errno (a mismatch, a time-out).
// The exit status is the number of OPs that failed (100 at most).
// --op-comm: before OP number I the process renames itself "opI", so that
// the audit line of a refusal names the OP that caused it (otherwise its
// comm stays "vmhelper").
//
// ADDR is an IPv4 or IPv6 literal (::ffff:a.b.c.d: an IPv6 socket); PORT a
// number, heldN (the port of the N-th socket `hold` kept) or /FILE (a port
// `hold` wrote there); PID a number or ppid; NAME a unix socket path, or
// @name for an abstract one.
//
// Files:
//   read,PATH                  open O_RDONLY and read: ok DATA (escaped)
//   list,DIR                   opendir and read every entry: ok N (entries)
//   open,PATH,FLAGS            FLAGS: '+' list of r w rw trunc append creat excl
//   mkdir|rmdir|unlink|mkfifo|mknod,PATH   (mknod: a regular file)
//   symlink,TARGET,PATH | link,OLD,NEW | rename,OLD,NEW
//   renameat2,OLD,NEW,noreplace|exchange
//   truncate,PATH,LEN | chmod,PATH,OCTAL | chown,PATH (to our own uid and gid)
//   utimes,PATH,set|now        explicit times, or NULL (the current time)
//   setxattr,PATH,NAME,VALUE | removexattr,PATH,NAME
//   setacl,PATH,access|default,UID[,HOW] | rmacl,PATH,access|default[,HOW]
//                              set a POSIX ACL (user::rw- user:UID:rw- group::r--
//                              mask::rw- other::r--) as the binary value of
//                              system.posix_acl_access or _default, or remove it.
//                              HOW: path (setxattr, default), lpath (lsetxattr),
//                              fd (fsetxattr on an fd opened O_RDONLY), uring
//                              and uring-fd (IORING_OP_SETXATTR, _FSETXATTR; set only)
//   chdir,PATH
//   fd-chmod,PATH,OCTAL | fd-chown,PATH | fd-utimes,PATH | fd-setxattr,PATH,NAME,VALUE
//                              the same through an fd opened O_RDONLY
//   fd-setflags,PATH,noatime|nodump   add an inode flag (FS_IOC_SETFLAGS) through
//                              an fd opened O_RDONLY
//   opentree-move,SRC,DST      open_tree(SRC, OPEN_TREE_CLONE), then move_mount
//                              it onto DST: a bind mount by the new mount API
//   mount,SRC,DST,TYPE,FLAGS[,DATA]   mount(2); SRC, TYPE "-" for none; FLAGS a
//                              '+' list of bind move rec, or none
//   tmpfile,DIR                open(DIR, O_TMPFILE | O_WRONLY)
//   tmpfile-link,DIR,NEW       an O_TMPFILE in DIR, linked in as NEW through /proc/self/fd
//   opath-reopen,PATH[,w]      open O_PATH, then read /proc/self/fd/N (w: open it O_WRONLY)
//   opath-at,DIR,NAME          open DIR O_PATH, then read openat(dirfd, NAME)
//   openat2,DIR,PATH,RESOLVE   DIR "-" for AT_FDCWD, else opened O_PATH;
//                              RESOLVE: no_symlinks no_magiclinks beneath
//                              in_root no_xdev cached; then read
//   uring-open,PATH,inline|async|sqpoll   IORING_OP_OPENAT, then read
//   memfd-loader,LOADER,PROGRAM   copy PROGRAM into a memfd and run it as
//                              `LOADER /proc/self/fd/N`: "ok" if it exited 0
//   mprotect-exec,PATH         map PATH read-only, then mprotect it PROT_EXEC
//   scan,PATH[,NEEDLE]         open O_RDONLY and read it all; ok if NEEDLE is in it
//   flood,PATH,N               N opens of PATH: ok refused N cpu_ms M (the opens
//                              refused with EPERM, and this process's CPU time)
//   touch,FILE | wait,FILE     create FILE | wait up to 60 s until it exists
//   createrace,DIR,SECONDS     creates DIR/f1, DIR/f2... (O_CREAT|O_EXCL) for
//                              SECONDS while something else moves DIR away; each
//                              file gone from DIR by the time its open returns
//                              gets its times set through the open fd: ok
//                              created N moved M timed K (K of the M worked)
//   nest,DIR,NAME,N[,walk]     N nested directories NAME in DIR, each made through
//                              the last one's fd: ok, or "EPERM at K" for the first
//                              that failed (walk: a rename before each voids the
//                              decision cache, so each is decided by its path)
//   descend,DIR,NAME,N[,walk]  the same through N nested directories NAME that
//                              exist: opens each through the last one's fd
// Network:
//   connect,tcp|udp,ADDR,PORT  connect (udp: then send one datagram)
//   connect,stdin,ADDR,PORT    connect the socket this process got as stdin
//   sendto,udp|udp-unspec,ADDR,PORT[,lo]  unconnected sendto (udp-unspec: an
//                              IPv4 address with sin_family AF_UNSPEC; lo: from a
//                              socket bound to 127.0.0.1, ::1 or ::ffff:127.0.0.1
//                              first, as a never-bound one is bound to the
//                              wildcard address by the send)
//   isocket,FAMILY,TYPE,PROTO[,uring]  socket() by numbers, then close (uring:
//                              IORING_OP_SOCKET)
//   sctp,connect|connectx|sendto,ADDR,PORT   an SCTP association to ADDR by
//                              connect(), the SCTP_SOCKOPT_CONNECTX socket option
//                              (both one-to-one sockets) or a sendto on a
//                              one-to-many socket (SOCK_SEQPACKET, protocol 0);
//                              then one message each way: ok if it comes back
//   sctp-serve,ADDR,PORT,READY,STOP   SCTP echo server (one-to-one): creates
//                              READY once listening, echoes the first message of
//                              each association until STOP exists (300 s at
//                              most): ok N (associations echoed)
//   inbound,tcp4|tcp6|udp4|udp6,HOW,FILE[,ADDR,PORT]   a never-bound socket
//                              left to the kernel's automatic bind: tcp HOW listen
//                              or uring-listen (IORING_OP_LISTEN, 6.11+); udp HOW
//                              sendto (to ADDR PORT) or send (no destination:
//                              EDESTADDRREQ expected). Writes the port it got to
//                              FILE (0: none), then waits for a connection and
//                              a byte, or a datagram, from anywhere: ok PORT, or
//                              inbound:none once FILE.done exists (or after 60 s)
//   deliver,tcp|udp,ADDR,PORT  tcp: connect (10 s at most) and send a byte;
//                              udp: sendto one datagram
//   fastopen,ADDR,PORT         TCP sendto with MSG_FASTOPEN
//   bind,tcp|udp|mptcp,ADDR,PORT   bind, then close
//   bind,unix,PATH             bind a unix stream socket to PATH (a new file)
//   hold,tcp|udp,ADDR,PORT[,FILE]  bind (tcp: and listen) and keep the socket;
//                              writes the bound port to FILE
//   unbind                     connect(AF_UNSPEC) on every held socket
//   serve,tcp|udp,ADDR,PORT    a round trip to our own server: bind (and
//                              listen); a child connects and sends (udp: a
//                              connected send and a sendto); we receive
//   unix,stream|seqpacket|dgram|dgramto,NAME  connect (dgram: then send;
//                              dgramto: an unconnected sendto)
//   autobind,stream|dgram      bind to the family only (an abstract name the
//                              kernel picks), then reach it from a second socket
//   socket,netlink|packet|alg|vsock
//   srcroute,rthdr|rthdr-pktoptions|rthdr-cmsg,ADDR,PORT,VIA[,SRC]   "x" to
//                              ADDR (IPv6) on a UDP socket with a type 2 routing
//                              header through VIA: the IPV6_RTHDR socket option
//                              or one in IPV6_2292PKTOPTIONS, set before connect,
//                              or a sendmsg control message; SRC: bind there first
//   cmsgs,N,ADDR,PORT,SRC      sendmsg "x" with N IPV6_HOPLIMIT (IP_TTL) control
//                              messages, from a socket bound to SRC
//   reuse,tcp|udp,ADDR,PORT[,FILE]   hold, with SO_REUSEPORT set before bind
//   nodest,4|6,send|write      send/write on a never-bound UDP socket, no
//                              destination: "ok|CALL:ERRNO port N", its port after
// Processes:
//   ptrace,PID                 PTRACE_ATTACH, wait for the stop, detach
//   vmread,PID,HEXADDR         process_vm_readv; ok if it reads the victims' secret
//   readlink,PATH | kill,PID,SIG
//   sigio,OWNER,SIG[,HOW]      a socket owned by OWNER (a PID, -PGRP or
//                              self), F_SETSIG SIG, O_ASYNC, then a write to
//                              its peer: the kernel signals OWNER. HOW sets
//                              the owner: setown (default), setown_ex or
//                              fiosetown. For self, ok only if SIG arrived.
//   ownchild                   fork a child, then ptrace it, read its environ
//                              and memory, and kill it
//   userns,clone|clone3|unshare    a new user namespace
//   bpf                        BPF_MAP_CREATE (an array)
//   ids                        ok RUID EUID SUID
//   limit,PID                  ok SOFT: the RLIMIT_FSIZE soft limit of PID, read
//                              (PID as for prlimit below)
//   cgclone,DIR                clone3(CLONE_INTO_CGROUP) into cgroup DIR (an
//                              O_PATH fd): ok CGROUP, the child's /proc/PID/cgroup
// Processes outside the job (PID: also self, child, a child this process
// forks on first use, which waits and dies with it, or thread, a thread of it):
//   prlimit,PID,N              prlimit RLIMIT_FSIZE (soft and hard) to N bytes
//   setpriority,process|pgrp|user,WHO,NICE   WHO: a PID, PGRP or UID
//   getnice,PID                ok NICE
//   ioprio,process|pgrp|user,WHO   ioprio_set best-effort level 7
//   affinity,PID,CPU           sched_setaffinity to CPU alone
//   sched,PID,batch|idle|other sched_setscheduler
//   setattr,PID,NICE           sched_setattr SCHED_OTHER with NICE
//   setparam,PID               sched_setparam, priority 0
//   child                      ok PID of the child
// IPC (KEY in hex, NAME /name): make creates the object (exclusively) with
// TEXT in it (sem: the value TEXT), then leaves it; read: ok TEXT (msg and mq:
// the first message, put back)
//   shm|msg|sem,make,KEY,TEXT | shm|msg|sem,read,KEY   SysV
//   mq|pshm,make,NAME,TEXT | mq|pshm,read,NAME          POSIX message queue, shm_open
// Keys (RING and ID: @t @p @s @u @us or a serial; keys of type "user"):
//   key,add,RING,DESC,DATA     ok SERIAL
//   key,id,RING                KEYCTL_GET_KEYRING_ID, no create: ok SERIAL
//   key,search,RING,DESC       ok SERIAL
//   key,read,ID | key,describe,ID   ok DATA | ok TYPE;UID;GID;PERM;DESC
//   key,list,RING              ok SERIAL... (KEYCTL_READ of a keyring)
//   key,link,ID,RING | key,setperm,ID,HEXPERM | key,invalidate,ID
//   key,persistent             KEYCTL_GET_PERSISTENT (own uid, into @s): ok SERIAL
// Terminals:
//   pty,hold,FILE,TEXT,N       a pty pair whose master stays open: its slave's
//                              path goes to FILE, then N lines TEXT into the master
//   pty,own                    a pty via /dev/ptmx, a line through it each way: ok SLAVE
//   ttyread,PATH               open PATH (O_NOCTTY), read a line (5 s at most): ok LINE
//   tiocsti,FD,TEXT            push TEXT and a newline into FD's input (TIOCSTI)
//   tcxonc,FD                  stop FD's output, then restart it (tcflow: TCXONC)
//   tiocsctty,FD               make FD our controlling terminal
//
// The two modes run instead of the runner, and print their own lines:
// fsrace: a child swaps the symlink LINK between targets A and B (symlink
// to LINK.tmp, rename over LINK) while this process opens and reads
// READPATH (LINK or a path through it) for SECONDS. Prints one line per
// distinct outcome, "content <escaped> N" or "error <errno name> N".
// victims: forks N children, each named "victim", that die with this
// process and share its memory image; FILE gets the address of the secret
// vmread checks, then one pid per line (written whole, by rename). Runs
// until killed.
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "helper.h"

namespace vmhelper {

std::vector<int> g_held;

namespace {

// An OP's result, in the runner's format.
std::string run_op(const std::string& op) {
    Fields f = fields(op);
    std::optional<std::string> r;
    try {
        r = fs_op(f);
        if (!r) r = net_op(f);
        if (!r) r = proc_op(f);
    } catch (const std::exception&) {
        r.reset();  // a malformed number
    }
    if (!r || *r == "usage") return f[0] + ":usage";
    // A file op that is one call reports its errno alone: the call is the op.
    if (!r->starts_with("ok") && r->find(':') == std::string::npos) return f[0] + ":" + *r;
    return *r;
}

int run(int argc, char** argv) {
    int first = 1;
    const bool op_comm = argc > 1 && std::strcmp(argv[1], "--op-comm") == 0;
    if (op_comm) first++;
    printf("pid %d\n", getpid());
    fflush(stdout);
    int failed = 0;
    for (int i = first; i < argc; i++) {
        const int index = i - first;
        if (op_comm) prctl(PR_SET_NAME, ("op" + std::to_string(index)).c_str());
        std::string result = run_op(argv[i]);
        if (!result.starts_with("ok")) failed++;
        printf("%d %s -> %s\n", index, argv[i], result.c_str());
        fflush(stdout);
    }
    return std::min(failed, 100);
}

}  // namespace
}  // namespace vmhelper

int main(int argc, char** argv) {
    using namespace vmhelper;
    if (argc == 2) {
        Fields f = fields(argv[1]);
        try {
            if (f[0] == "fsrace") return fs_race(f);
            if (f[0] == "victims") return victims(f);
        } catch (const std::exception&) {
            return 2;
        }
    }
    if (argc < 2) {
        fprintf(stderr, "usage: vmhelper [--op-comm] OP... | fsrace,... | victims,...\n");
        return 2;
    }
    return run(argc, argv);
}
