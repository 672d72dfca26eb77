// Placeholder: filled in by the fs_ops_test tests.
#include "harness.h"
