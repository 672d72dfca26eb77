// `confine audit --suggest`: from a log written in audit mode, the
// smallest policy that would have let the run through.
#pragma once

#include <istream>
#include <string>

#include "common/error.h"

namespace confine {

struct SuggestOptions {
    std::string workdir;    // the job's --workdir, put back as {workdir}; empty: not known
    std::string base_file;  // a policy to extend (--policy); empty: the embedded default
};

// The policy, as TOML text that `confine check` takes: the base with what
// the log asked for added, paths given back their variables ({workdir},
// {home}, {tmp}, {user_home}) and grouped into directories where several
// files of one directory were asked for (a comment says so). What no
// policy can grant is listed in comments.
Result<std::string> suggest_policy(std::istream& log, const SuggestOptions& o);

}  // namespace confine
