// Placeholder: filled in by the net_more_test tests.
#include "harness.h"
