/*
 * The libFuzzer harnesses' reader of their input: bytes taken from the front, zeros once it is
 * used up (so a short input still builds a whole structure), little-endian numbers.
 */
#ifndef DS_FUZZ_INPUT_H
#define DS_FUZZ_INPUT_H

#include <stdint.h>

struct fuzz_input {
    const uint8_t *p;
    const uint8_t *end;
};

static inline uint8_t fuzz_take_u8(struct fuzz_input *in)
{
    return in->p < in->end ? *in->p++ : 0;
}

/* The next bytes (at most 8) as a little-endian unsigned number. */
static inline uint64_t fuzz_take_le(struct fuzz_input *in, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes && i < 8; i++) {
        v |= (uint64_t)fuzz_take_u8(in) << (8 * i);
    }
    return v;
}

#endif /* DS_FUZZ_INPUT_H */
