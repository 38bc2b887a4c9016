"""hnas's checkpoint files (src/io/checkpoint.h, which gives the format) in Python: CRC-32C, and reading
them. The benchmark twin reads the files `hnas-bench` writes; tests/fuzz/make_checkpoint_seeds.py rewrites
real checkpoints.
"""
import json
import struct

MAGIC, VERSION = b"HNASCKPT", 1
CRC32C_TABLE = []
for _byte in range(256):
    _crc = _byte
    for _ in range(8):
        _crc = (_crc >> 1) ^ (0x82F63B78 if _crc & 1 else 0)  # the Castagnoli polynomial, reflected
    CRC32C_TABLE.append(_crc)


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    table = CRC32C_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def align64(n):
    return (n + 63) // 64 * 64


def read_header(blob, path):
    """(header, where the data starts) of a checkpoint's bytes; the preamble's and the header's checksums are
    checked."""
    if len(blob) < 32 or blob[:8] != MAGIC:
        raise SystemExit(f"{path}: not an hnas checkpoint (bad magic)")
    version, header_length, data_length, header_crc, preamble_crc = struct.unpack_from("<IIQII", blob, 8)
    if version != VERSION:
        raise SystemExit(f"{path}: checkpoint format version {version}, this reader knows {VERSION}")
    if crc32c(blob[:28]) != preamble_crc:
        raise SystemExit(f"{path}: preamble checksum mismatch")
    header_bytes = blob[32:32 + header_length]
    if crc32c(header_bytes) != header_crc:
        raise SystemExit(f"{path}: header checksum mismatch")
    start = align64(32 + header_length)
    if len(blob) != start + data_length:
        raise SystemExit(f"{path}: {len(blob)} bytes, the preamble says {start + data_length}")
    return json.loads(bytes(header_bytes).decode("utf-8")), start


def read_checkpoint(path, verify_crc=False, copy=True):
    """(metadata, {name: numpy array, or bytes for a bytes entry}) of an hnas checkpoint. The entries'
    checksums are checked only with verify_crc (slow in pure Python). copy=False: read-only arrays viewing
    the file's bytes (one copy of the file in memory instead of two)."""
    import numpy as np  # here, so that reading headers (the fuzz seed maker) needs the standard library alone

    with open(path, "rb") as f:
        blob = f.read()
    header, start = read_header(blob, path)
    view = memoryview(blob)
    arrays = {}
    for entry in header["entries"]:
        begin = start + entry["offset"]
        raw = view[begin:begin + entry["length"]]
        if verify_crc and crc32c(raw) != entry["crc32c"]:
            raise SystemExit(f"{path}: entry {entry['name']}: checksum mismatch")
        if entry["dtype"] == "bytes":
            arrays[entry["name"]] = bytes(raw)
            continue
        dtype = {"f32": "<f4", "i32": "<i4"}[entry["dtype"]]
        array = np.frombuffer(raw, dtype=dtype).reshape(entry["shape"])
        arrays[entry["name"]] = array.copy() if copy else array
    return header["metadata"], arrays
