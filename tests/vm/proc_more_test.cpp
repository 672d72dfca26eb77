// Placeholder: filled in by the proc_more_test tests.
#include "harness.h"
