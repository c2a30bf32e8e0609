#!/usr/bin/python3
"""ptqstats.py: reads .ptqstats files (format in io/stats.h; checksum checked) for the tests.
  ptqstats.py same A B [TEXT]   the same model, preprocessing (containing TEXT), image count and
                                per-tensor records (names, order, statistics bit for bit)
  ptqstats.py header A          the header fields as JSON (tensors, ids: their counts)"""
import struct, sys, json
def fnv(b):
    h = 0xcbf29ce484222325
    for c in b: h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
    return h
def read(path):
    d = open(path, 'rb').read()
    assert d[:8] == b'PTQSTATS' and struct.unpack_from('<Q', d, len(d) - 8)[0] == fnv(d[:-8]), path
    p = 8
    ver, flags, model, plen = struct.unpack_from('<IIQI', d, p); p += 20
    prep = d[p:p + plen].decode(); p += plen
    shards, ids = [], []
    if ver == 1:   # image-list hashes, then the image count
        ns, = struct.unpack_from('<I', d, p); p += 4
        shards = list(struct.unpack_from('<%dQ' % ns, d, p)); p += 8 * ns
        nimg, = struct.unpack_from('<Q', d, p); p += 8
    else:          # version 2: the image count, then the ids (ascending)
        nimg, = struct.unpack_from('<Q', d, p); p += 8
        ids = list(struct.unpack_from('<%dQ' % nimg, d, p)); p += 8 * nimg
        assert ids == sorted(ids), path
    nt, = struct.unpack_from('<I', d, p); p += 4
    tensors = []
    for _ in range(nt):
        start = p
        ln, = struct.unpack_from('<I', d, p); p += 4
        name = d[p:p + ln].decode(); p += ln
        p += 40 + 12 + 8
        nb, = struct.unpack_from('<I', d, p); p += 4
        for _ in range(nb):
            while d[p] & 0x80: p += 1
            p += 1
        tensors.append((name, d[start:p]))
    assert p == len(d) - 8
    return dict(version=ver, model=model, prep=prep, shards=shards, ids=ids, images=nimg, tensors=tensors)
cmd = sys.argv[1]
if cmd == 'same':   # same tensor records (names, order, statistics bit for bit)
    a, b = read(sys.argv[2]), read(sys.argv[3])
    assert a['model'] == b['model'] and a['prep'] == b['prep'] and a['images'] == b['images'], (a['images'], b['images'])
    assert [n for n, _ in a['tensors']] == [n for n, _ in b['tensors']]
    diff = [n for (n, x), (_, y) in zip(a['tensors'], b['tensors']) if x != y]
    assert not diff, '%d of %d tensors differ, first %s' % (len(diff), len(a['tensors']), diff[:3])
    if len(sys.argv) > 4: assert sys.argv[4] in a['prep'], a['prep']  # the preprocessing it must record
    print('%d tensors identical, %d images, %s' % (len(a['tensors']), a['images'],
          'the same image ids' if a['ids'] == b['ids'] else 'image lists %d and %d, ids %d and %d' %
          (len(a['shards']), len(b['shards']), len(a['ids']), len(b['ids']))))
elif cmd == 'header':
    h = read(sys.argv[2]); h['tensors'] = len(h['tensors']); h['ids'] = len(h['ids']); print(json.dumps(h))
