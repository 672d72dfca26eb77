// Tests of loader/wire.cpp: the daemon's request encoding, and a decoder
// that survives anything a hostile client sends.
#include <sys/socket.h>

#include <random>
#include <string>

#include <gtest/gtest.h>

#include "loader/wire.h"

namespace confine::wire {
namespace {

Request sample() {
    Request r;
    r.policy = "version = 1\n[filesystem]\nread = [\"/usr\"]\n";
    r.policy_name = "agent.toml";
    r.mode = "audit";
    r.job_id = "job-1";
    r.timeout = "90";
    r.user = "pool1";
    r.seed_home = "/srv/seed";
    r.audit_log = "/var/log/a.jsonl";
    r.command = {"sh", "-c", "echo hi", ""};
    r.env = {"PATH=/usr/bin", "EMPTY="};
    return r;
}

TEST(Wire, ARequestSurvivesTheRoundTrip) {
    auto r = decode(encode(sample()));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->policy, sample().policy);
    EXPECT_EQ(r->mode, "audit");
    EXPECT_EQ(r->user, "pool1");
    EXPECT_EQ(r->audit_log, "/var/log/a.jsonl");
    EXPECT_EQ(r->command, sample().command);
    EXPECT_EQ(r->env, sample().env);
    EXPECT_FALSE(r->print_policy);
}

TEST(Wire, MalformedRequestsAreRefusedWithTheirReason) {
    auto error = [](std::string_view payload) {
        auto r = decode(payload);
        return r ? std::string("accepted") : r.error().message;
    };
    using namespace std::string_literals;
    EXPECT_EQ(error(""), "request: protocol '' is not confine/1");
    EXPECT_EQ(error("confine/2\0arg\0ls\0"s), "request: protocol 'confine/2' is not confine/1");
    EXPECT_EQ(error("confine/1\0arg\0ls"s), "request: the last field has no terminating NUL");
    EXPECT_EQ(error("confine/1\0arg\0ls\0mode\0"s), "request: a key has no value");
    EXPECT_EQ(error("confine/1\0arg\0ls\0mode\0audit\0mode\0audit\0"s), "request: field 'mode' given twice");
    EXPECT_EQ(error("confine/1\0arg\0ls\0mode\0lax\0"s), "request: mode 'lax' is not enforce or audit");
    EXPECT_EQ(error("confine/1\0arg\0ls\0uid\0000\0"s), "request: unknown field 'uid'");
    EXPECT_EQ(error("confine/1\0arg\0ls\0env\0X\0"s), "request: env entry without '='");
    EXPECT_EQ(error("confine/1\0mode\0audit\0"s), "request: no command");
    EXPECT_EQ(error(std::string(kMaxRequest + 1, 'x')), "request: 131073 bytes, more than 131072");
    std::string many = "confine/1\0"s;
    for (size_t i = 0; i <= kMaxItems; i++) many += "arg\0x\0"s;
    EXPECT_EQ(error(many), "request: more than 4096 arg fields");
}

// Mutations of a valid request (flipped, cut, inserted and duplicated
// bytes) and random bytes: every input decodes or is refused, never more.
TEST(Wire, TheDecoderSurvivesFuzzing) {
    std::mt19937 rng(12);
    const std::string valid = encode(sample());
    size_t decoded = 0, refused = 0;
    for (int i = 0; i < 200000; i++) {
        std::string in = valid;
        for (int m = 1 + rng() % 4; m > 0; --m) {
            size_t at = rng() % (in.size() + 1);
            switch (rng() % 4) {
                case 0:
                    if (at < in.size()) in[at] = static_cast<char>(rng());
                    break;
                case 1: in.resize(at); break;
                case 2: in.insert(at, 1, static_cast<char>(rng() % 3 ? 0 : rng())); break;
                case 3: in.insert(at, in.substr(at, rng() % 64)); break;
            }
        }
        if (i % 10 == 0) {
            in.resize(rng() % 512);
            for (char& c : in) c = static_cast<char>(rng() % 4 ? rng() : 0);
        }
        auto r = decode(in);
        if (r) {
            decoded++;
            // Whatever was accepted re-encodes to something that decodes the same.
            auto again = decode(encode(*r));
            ASSERT_TRUE(again);
            EXPECT_EQ(again->command, r->command);
        } else {
            refused++;
        }
    }
    EXPECT_GT(decoded, 1000u);
    EXPECT_GT(refused, 1000u);
}

// Over a real socket pair: fds arrive, a message too long is refused, and
// the end of the stream is told apart from an empty message.
TEST(Wire, MessagesCarryFdsAndBoundaries) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    Fd a(sv[0]), b(sv[1]);
    ASSERT_TRUE(send(a.get(), Type::Request, "payload", {0, 1, 2, 0, 1}));
    auto m = receive(b.get());
    ASSERT_TRUE(m && *m);
    EXPECT_EQ((*m)->type, Type::Request);
    EXPECT_EQ((*m)->payload, "payload");
    EXPECT_EQ((*m)->fds.size(), 5u);
    int sndbuf = 1 << 20;
    setsockopt(a.get(), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    ASSERT_TRUE(send(a.get(), Type::Request, std::string(kMaxRequest + 10, 'x')));
    EXPECT_FALSE(receive(b.get()));
    a.reset();
    auto end = receive(b.get());
    ASSERT_TRUE(end);
    EXPECT_FALSE(*end);
}

}  // namespace
}  // namespace confine::wire
