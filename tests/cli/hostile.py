#!/usr/bin/env python3
"""Makes hostile inputs for `inspect` at test time (issue 13): corrupted copies of the nvcc-built
fixtures, synthetic cubins and fatbins of extreme sizes, and wheels with odd members.

    hostile.py KIND OUT [ARG...]

Each KIND is one function below; the file is small so that a reader of a failing test can see
exactly which bytes were changed.
"""
import struct
import sys
import zipfile
import zlib

EM_CUDA = 190
SHT_SYMTAB, SHT_STRTAB, SHT_NVINFO = 2, 3, 0x70000000


def shdrs(d):
    """(offset of each section header, shentsize, shnum, shstrndx) of a 64-bit ELF image."""
    shoff, = struct.unpack_from("<Q", d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3a)
    return [shoff + i * shentsize for i in range(shnum)], shstrndx


def truncate(src, out, cut):
    """The first CUT bytes of SRC (negative: all but the last -CUT)."""
    d = open(src, "rb").read()
    open(out, "wb").write(d[:int(cut)])


def shoff_past_end(src, out):
    """A cubin whose section header table starts past the end of the file."""
    d = bytearray(open(src, "rb").read())
    struct.pack_into("<Q", d, 0x28, len(d) + 4096)
    open(out, "wb").write(d)


def section_past_end(src, out):
    """A cubin whose .nv.info section's data runs past the end of the file."""
    d = bytearray(open(src, "rb").read())
    heads, shstrndx = shdrs(d)
    stroff, = struct.unpack_from("<Q", d, heads[shstrndx] + 0x18)
    for h in heads:
        name, = struct.unpack_from("<I", d, h)
        if d[stroff + name:stroff + name + 9] == b".nv.info\0":
            struct.pack_into("<Q", d, h + 0x20, len(d) * 2)  # sh_size
    open(out, "wb").write(d)


def symtab_link(src, out, target):
    """A cubin whose symbol table names its string table as section TARGET ('shstrtab' for the
    section-name table, else a number)."""
    d = bytearray(open(src, "rb").read())
    heads, shstrndx = shdrs(d)
    link = shstrndx if target == "shstrtab" else int(target)
    for h in heads:
        if struct.unpack_from("<I", d, h + 4)[0] == SHT_SYMTAB:
            struct.pack_into("<I", d, h + 0x28, link)  # sh_link
    open(out, "wb").write(d)


def elf_magic_junk(out):
    """ELF magic followed by bytes libelf does not take for an ELF header (class 9)."""
    open(out, "wb").write(b"\x7fELF\x09\x09\x01" + b"\0" * 57 + b"junk" * 16)


def many_kernels(out, n):
    """A synthetic sm_90 cubin with N kernels: one .nv.info.kI section each (empty), plus the
    section-name table. More than 0xff00 sections use ELF's extended numbering."""
    n = int(n)
    names = bytearray(b"\0.shstrtab\0")
    offs = []
    for i in range(n):
        offs.append(len(names))
        names += b".nv.info.k%d\0" % i
    nsec = n + 2  # null, .shstrtab, kernels
    data_off = 64
    shoff = data_off + len(names)
    shoff += (-shoff) % 8
    ext = nsec >= 0xff00
    ehdr = struct.pack("<4sBBBBB7sHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0x41, 8, b"\0" * 7,
                       2, EM_CUDA, 1, 0, 0, shoff, 90 << 8, 64, 0, 0, 64,
                       0 if ext else nsec, 0xffff if ext else 1)
    out_b = bytearray(ehdr)
    out_b += names
    out_b += b"\0" * (shoff - len(out_b))
    # section 0 holds the real count and string-table index when they do not fit
    out_b += struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, nsec if ext else 0, 1 if ext else 0, 0, 0, 0)
    out_b += struct.pack("<IIQQQQIIQQ", 1, SHT_STRTAB, 0, 0, data_off, len(names), 0, 0, 1, 0)
    for i in range(n):
        out_b += struct.pack("<IIQQQQIIQQ", offs[i], SHT_NVINFO, 0, 0, data_off, 0, 0, 0, 4, 0)
    open(out, "wb").write(out_b)


def many_ptx(out, n):
    """A fatbin of one container holding N empty PTX entries for compute_90."""
    n = int(n)
    entry = struct.pack("<HHIQIIHHIIIQQQ", 1, 0x101, 64, 0, 0, 0, 0, 8, 90, 0, 0, 1, 0, 0)
    body = entry * n
    with open(out, "wb") as f:
        f.write(struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)))
        f.write(body)


def stored_wheel(out, member_src):
    """A wheel whose shared object is stored (not compressed), and an empty stored member."""
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("pkg/__init__.py", b"", compress_type=zipfile.ZIP_STORED)
        z.write(member_src, "pkg/lib.so", compress_type=zipfile.ZIP_STORED)
        z.writestr("pkg/empty.so", b"", compress_type=zipfile.ZIP_STORED)


def zero_member_wheel(out, size):
    """A wheel with one deflated member 'pkg/big.so' of SIZE zero bytes (a zip bomb when large),
    written in chunks so that making it needs little memory."""
    size = int(size)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        info = zipfile.ZipInfo("pkg/big.so")
        info.compress_type = zipfile.ZIP_DEFLATED  # a ZipInfo is stored unless told
        with z.open(info, "w", force_zip64=size >= 1 << 31) as m:
            chunk = b"\0" * (1 << 20)
            left = size
            while left:
                m.write(chunk[:min(left, len(chunk))])
                left -= min(left, len(chunk))


def lying_size_wheel(out, size, declared):
    """A wheel whose member 'pkg/big.so' of SIZE bytes says, in both its headers, that it has
    DECLARED bytes: the reader must count, not trust."""
    zero_member_wheel(out, size)
    d = bytearray(open(out, "rb").read())
    size, declared = int(size), int(declared)
    # local header: uncompressed size at +22; central directory entry: at +24
    for sig, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        i = d.find(sig)
        while i >= 0:
            if struct.unpack_from("<I", d, i + at)[0] == size:
                struct.pack_into("<I", d, i + at, declared)
            i = d.find(sig, i + 4)
    open(out, "wb").write(d)


if __name__ == "__main__":
    globals()[sys.argv[1].replace("-", "_")](*sys.argv[2:])
