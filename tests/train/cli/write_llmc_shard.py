"""Writes an llm.c .bin token shard: python3 write_llmc_shard.py OUT COUNT MAX_TOKEN [EXTRA].

Layout (llm.c's dev/data): 256 little-endian int32 header words (magic 20240520, version 1, token
count), then COUNT little-endian uint16 tokens. The tokens cycle through a fixed pseudo-random
sequence in [0, MAX_TOKEN); with EXTRA given, token EXTRA is written once in the middle (a token the
model's vocabulary may not hold).
"""
import struct
import sys


def main() -> None:
    out, count, max_token = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    extra = int(sys.argv[4]) if len(sys.argv) > 4 else None
    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 1, count
    state = 12345
    tokens = []
    for _ in range(count):
        state = (1103515245 * state + 12345) % (1 << 31)
        tokens.append((state >> 8) % max_token)
    if extra is not None:
        tokens[count // 2] = extra
    with open(out, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(f"<{count}H", *tokens))


if __name__ == "__main__":
    main()
