// The embedded default policy of the contract, used when `confine run` gets
// no --policy. Its source is default.toml, so it can be shown, copied and
// edited as a starting point; the build parses it with the same parser as a
// user's policy (embed_default.cpp) and embeds both the text and the result.
#include "policy/policy.h"

#include "policy/default_policy.h"  // generated

namespace confine::policy {

std::string_view default_policy_text() {
    return kDefaultPolicyText;
}

// Built once per process: the daemon builds it before it forks workers,
// which start from its copy.
Policy default_policy() {
    static const Policy built = parsed_default_policy();
    return built;
}

}  // namespace confine::policy
