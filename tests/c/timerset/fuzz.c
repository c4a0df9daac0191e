/*
** fuzz_timerset -- libFuzzer target: the input bytes are an operation sequence on
** the internal ordered set, checked against the reference model of tset_model.h.
*/
#include <stddef.h>
#include <stdint.h>

#include "tset_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    model_run(data, size);
    return 0;
}
