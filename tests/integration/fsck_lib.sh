# Damage helpers shared by the fsck repair and restore tests (sourced after lib.sh).

# segment_blocks SEG: "offset length" of each block of a segment, from the block headers
# (64-byte segment header, then blocks whose 72-byte fixed part holds the header and payload
# lengths, little-endian).
segment_blocks() {
  "$PY" - "$1" <<'PY'
import struct, sys
d = open(sys.argv[1], 'rb').read()
at = 64
while at + 72 <= len(d):
    hb, pb = struct.unpack_from('<HI', d, at + 6)
    print(at, hb + pb)
    at += hb + pb
PY
}

# flip_byte FILE AT: one byte of FILE changed in place (XOR 0x5A).
flip_byte() {
  "$PY" - "$1" "$2" <<'PY'
import sys
path, at = sys.argv[1], int(sys.argv[2])
with open(path, 'r+b') as f:
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x5A]))
PY
}

# torn_tail SEG GARBAGE_BYTES: the issue's torn tail, SEG cut 37 bytes short, then that many
# random bytes appended.
torn_tail() {
  truncate -s -37 "$1"
  head -c "$2" /dev/urandom >>"$1"
}
