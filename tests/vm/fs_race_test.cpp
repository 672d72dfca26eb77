// Placeholder: filled in by the fs_race_test tests.
#include "harness.h"
