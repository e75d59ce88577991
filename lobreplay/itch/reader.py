"""Reading ITCH 5.0 files in chunks: BinaryFILE framing (raw or gzip) and
MoldUDP64 inside a pcap. C walks the length prefixes (lobreplay.core._coreapi.itch_frames);
this module only moves bytes and keeps count.

Every problem is an InputError whose message names the file, the byte offset
(in the decompressed stream for gzip) and what was expected. A partial last
message is an error unless allow_truncated, in which case it is counted.
"""
from __future__ import annotations

import bisect
import io
import os
import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator

import numpy as np

from lobreplay.core import _coreapi as core
from lobreplay import _gz
from lobreplay.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
PCAP_MAGICS = {b"\xd4\xc3\xb2\xa1": ("<", 1_000), b"\xa1\xb2\xc3\xd4": (">", 1_000),
               b"\x4d\x3c\xb2\xa1": ("<", 1), b"\xa1\xb2\x3c\x4d": (">", 1)}
MAX_FRAME = 2 + 65535
# A pcap whose sequence anomalies lose more than this share of its messages (damaged packets
# dropped, gaps) is an error unless allow_gaps (--allow-gaps)
MAX_LOSS_SHARE = 0.01


@dataclass
class Chunk:
    """Complete messages: buf[offsets[i]] is the type byte of message i. buf, offsets
    and types are the reader's own arrays: valid until it reads the next chunk into them."""
    buf: np.ndarray        # uint8
    offsets: np.ndarray    # uint32
    types: np.ndarray      # uint8
    base: int              # stream offset of buf[0]
    first_message: int     # file-wide index of message 0 of this chunk
    type_counts: np.ndarray | None = None  # messages per type byte (256), counted once when framed

    @property
    def n(self) -> int:
        return len(self.offsets)

    def has(self, t: str) -> bool:
        """Whether the chunk holds a message of type t."""
        if self.type_counts is not None:
            return bool(self.type_counts[ord(t)])
        return bool((self.types == ord(t)).any())

    def present(self) -> set[str]:
        """The message types in the chunk."""
        counts = self.type_counts if self.type_counts is not None else np.bincount(self.types, minlength=256)
        return {chr(t) for t in np.flatnonzero(counts)}


@dataclass
class ReadStats:
    """What reading a file found, to be reported."""
    bytes: int = 0                       # stream bytes walked (decompressed)
    messages: int = 0
    by_type: Counter = field(default_factory=Counter)  # type character -> count
    end_marker: bool = False             # a zero-length frame ended the session
    truncated_offset: int | None = None  # a partial last message started here
    truncated_bytes: int = 0
    stream_break: str | None = None      # allow_truncated: why a gzip stream ended early
    end_marker_offset: int | None = None  # where that frame was (stream offset)
    trailing_after_end: int = 0          # bytes after the end-of-session marker (allow_truncated: ignored)
    mold_packets: int = 0
    mold_gaps: list = field(default_factory=list)  # (expected sequence, got sequence)
    mold_duplicates: int = 0             # packets (or their leading messages) already seen: dropped
    mold_heartbeats: int = 0             # packets of no message (heartbeats, the end-of-session packet)
    mold_other_frames: int = 0           # capture frames that are not MoldUDP64 over IPv4/UDP: skipped
    mold_sessions: list = field(default_factory=list)  # the MoldUDP64 session names, in order seen
    mold_damaged: int = 0                # packets whose sequence agrees with neither neighbour: dropped
    mold_damaged_messages: int = 0       # ... the messages they held
    mold_missing: int = 0                # messages the gaps skipped
    mold_back: int = 0                   # jumps back before the session's first sequence (nothing lost)
    mold_kept: int = 0                   # messages taken from the packets
    mold_first: dict = field(default_factory=dict)  # kind -> the first such packet: byte, sequence, expected

    def mold_note(self, kind: str, byte: int, seq: int, expected: int, nxt: int | None = None) -> None:
        if kind not in self.mold_first:
            self.mold_first[kind] = {"byte": byte, "sequence": seq, "expected": expected,
                                     **({"next_packet_sequence": nxt} if nxt is not None else {})}

    def mold_lost(self) -> int:
        """Messages the sequence anomalies cost: those of damaged packets and those gaps skipped."""
        return self.mold_damaged_messages + self.mold_missing

    def moldudp64(self) -> dict | None:
        """What reading a pcap found, as summary.json's `moldudp64` says it (None: not a pcap)."""
        if not self.mold_packets:
            return None
        lost = self.mold_lost()
        return {"packets": self.mold_packets, "gaps": self.mold_gaps, "duplicates_dropped": self.mold_duplicates,
                "heartbeats": self.mold_heartbeats, "other_frames": self.mold_other_frames,
                "sessions": self.mold_sessions, "damaged_dropped": self.mold_damaged,
                "damaged_messages": self.mold_damaged_messages, "messages_missing": self.mold_missing,
                "went_back": self.mold_back, "messages_lost": lost,
                "lost_share": round(lost / (lost + self.mold_kept), 6) if lost else 0.0,
                "first": self.mold_first}

    def unknown_types(self) -> dict[str, int]:
        return {t: c for t, c in self.by_type.items() if core.itch_length(ord(t)) == 0}

    def truncation(self) -> dict | None:
        """What allow_truncated let the read stop at, as summary.json's `truncated` says it
        (None: the stream was read whole): the offset where it stopped, the bytes of a partial
        message there, why a gzip stream ended early, the bytes after an end-of-session marker."""
        if self.truncated_offset is None and not self.stream_break and not self.trailing_after_end:
            return None
        return {"offset": self.bytes if self.truncated_offset is None else self.truncated_offset,
                "bytes": self.truncated_bytes, "stream_break": self.stream_break,
                "bytes_after_end_marker": self.trailing_after_end}


class ItchFile:
    """An ITCH 5.0 file: raw or gzip BinaryFILE, or a pcap of MoldUDP64 packets.

    >>> for chunk in ItchFile(path).chunks(): ...
    """

    def __init__(self, path: str | os.PathLike, *, chunk_bytes: int = 16 << 20, allow_truncated: bool = False,
                 allow_gaps: bool = False):
        self.path = os.fspath(path)
        self.allow_gaps = allow_gaps
        self.name = os.path.basename(self.path)
        self.chunk_bytes = max(chunk_bytes, 2 * MAX_FRAME)
        self.allow_truncated = allow_truncated
        try:
            self.size = os.path.getsize(self.path)
            with open(self.path, "rb") as f:
                head = f.read(4)
        except OSError as e:
            raise InputError(f"{self.path}: cannot read: {e.strerror or e}") from None
        if not head:
            raise InputError(f"{self.path}: empty file: expected ITCH 5.0 messages (BinaryFILE framing, "
                             "gzip, or a pcap of MoldUDP64)")
        self.compressed = head[:2] == GZIP_MAGIC
        self.framing = "pcap" if head in PCAP_MAGICS else "binaryfile"
        self.stats = ReadStats()
        self._raw: _CountingReader | None = None
        self._salvage: _gz.SalvageReader | None = None
        self._cut = False  # allow_truncated: the gzip stream is known to be cut short
        self._pieces: list = []  # a pcap: (offset in the joined messages, offset in the file) per packet

    @property
    def raw_position(self) -> int:
        """Bytes of the file (compressed, for gzip) read so far in the current pass."""
        return self._raw.position if self._raw else 0

    # ---- byte sources ----

    def _open(self, skip: int = 0) -> BinaryIO:
        """The file's stream. A gzip stream known to be cut short (self._cut) is read by a
        SalvageReader, `skip` decompressed bytes in."""
        self._raw = _CountingReader(open(self.path, "rb"))
        raw = io.BufferedReader(self._raw, buffer_size=1 << 20)
        self._salvage = None
        if self.compressed and self._cut:
            f, self._salvage = _gz.salvage_from(raw, skip)
            return f
        return _gz.open_read(raw, thread=True) if self.compressed else raw

    def _read_into(self, f: BinaryIO, view: memoryview, pos: int) -> tuple[int, BinaryIO]:
        """Read into view; pos: the stream offset of view[0]. Returns (bytes read, the
        reader to use from now on). A gzip stream cut short, with allow_truncated: the rest
        is read from there by a SalvageReader (every decodable byte, then the end)."""
        try:
            got = f.readinto(view)
            if not got and self._salvage is not None and self._salvage.broken:
                self.stats.stream_break = self._salvage.broken
            return got, f
        except _gz.ERRORS as e:
            if self.compressed and self.allow_truncated and self._salvage is None and (
                    isinstance(e, EOFError) or "Not a gzipped file" in str(e)):
                # a cut, or bytes after the last member that are not gzip (a download with
                # something appended): the fast reader (ISA-L on a thread) stops there and may have
                # dropped what it had inflated ahead: read again, exactly, from where this pass
                # had got to, up to the break (counted: stream_break)
                self._cut = True
                f.close()
                return self._read_into(self._open(pos), view, pos)
            if self.compressed and isinstance(e, EOFError):
                # (the piece being inflated is lost with the error: the cut lies somewhere in it)
                raise InputError(f"{self.path}: the gzip stream ({self.size:,} bytes) ends before its end-of-stream "
                                 f"marker, in the piece inflated after decompressed byte {pos:,}: a file cut short "
                                 "(an interrupted download?); --allow-truncated reads every message before the cut") \
                    from None
            if not self.compressed:
                raise InputError(f"{self.path}: offset {pos:,}: cannot read: {e}") from None
            # inflating runs ahead of the messages (a whole small file in one call): where it stood
            raise InputError(f"{self.path}: corrupt gzip data: {e} (in the piece inflated after decompressed byte "
                             f"{pos:,}; {self.raw_position:,} of the file's {self.size:,} compressed bytes "
                             "read)") from None

    def _stream(self) -> Iterator[bytes]:
        """pcap: the MoldUDP64 message blocks of every packet, framed like BinaryFILE."""
        with self._open() as f:
            data = f.read()
        yield self._pcap_payload(data)

    # ---- chunks ----

    def chunks(self, buffers: int = 1) -> Iterator[Chunk]:
        """Complete messages in chunks of about chunk_bytes. Raises InputError on
        a corrupt frame, on a file that is not ITCH, and (at the end, after every
        complete message has been yielded) on a partial last message.

        A chunk's bytes stay valid until `buffers` more chunks have been read: the
        reader fills that many buffers in turn (read_ahead keeps chunks in flight)."""
        self.stats = ReadStats()
        if self.framing == "pcap":
            payload = next(self._stream())
            yield from self._frame_bytes(iter([payload]), len(payload))
            return
        f = self._reading = self._open()
        try:
            yield from self._frame_stream(f, buffers)
        finally:
            self._reading.close()

    def _frame_bytes(self, pieces: Iterator[bytes], total: int) -> Iterator[Chunk]:
        buf = np.frombuffer(b"".join(pieces), np.uint8)
        if (yield from self._walk(buf, len(buf), 0, final=True, frames=_frame_arrays(len(buf)))) is None:
            self._after_end()

    def _at(self, offset: int) -> str:
        """Where a stream offset is, in the words of an error: the file's byte (a pcap: the
        byte of the capture where that message is), or the decompressed stream's offset."""
        if self.framing == "pcap" and self._pieces:
            i = bisect.bisect_right([a for a, _ in self._pieces], offset) - 1
            a, f = self._pieces[max(i, 0)]
            return f"byte {f + offset - a:,} of the capture"
        return f"{'decompressed stream offset' if self.compressed else 'byte'} {offset:,}"

    def _after_end(self) -> None:
        """The stream went on after an end-of-session marker (stats.trailing_after_end bytes,
        the whole rest read, so that a gzip stream's checksum is checked too): a zero-length
        frame in the middle of a file is damage (a run of zeros where messages should be, an
        interrupted download into a preallocated file, corrupt data), not the end of the day."""
        st = self.stats
        if st.trailing_after_end and not self.allow_truncated:
            raise InputError(
                f"{self.path}: an end-of-session marker (a zero-length frame) at {self._at(st.end_marker_offset)} "
                f"(after message {st.messages:,}) is followed by {st.trailing_after_end:,} more bytes: a damaged "
                "file (zeros or corrupt data where messages should be?); --allow-truncated stops at the marker "
                "and counts the bytes after it")

    def _frame_stream(self, f: BinaryIO, buffers: int = 1) -> Iterator[Chunk]:
        cap = self.chunk_bytes + MAX_FRAME
        # each buffer with its own framing arrays, which its chunk's offsets and types view
        bufs = [np.empty(cap, np.uint8) for _ in range(buffers)]
        frames = [_frame_arrays(cap) for _ in range(buffers)]
        turn = 0
        buf = bufs[0]
        view = memoryview(buf)
        have = 0     # valid bytes in buf
        base = 0     # stream offset of buf[0]
        checked = False
        while True:
            got, f = self._read_into(f, view[have:], base + have)
            self._reading = f
            eof = got == 0
            have += got
            if not checked and have:
                self._check_start(buf, have)
                checked = True
            if not have and eof:
                if base == 0:
                    raise InputError(f"{self.path}: empty stream: no ITCH messages")
                return
            done = yield from self._walk(buf, have, base, final=eof, frames=frames[turn % buffers])
            if done is None:  # end-of-session marker: the rest of the stream is counted, not framed
                scratch = memoryview(bytearray(1 << 20))  # (buf's chunk may still be in use)
                while not eof:
                    got, f = self._read_into(f, scratch, base + have)
                    self._reading = f
                    eof = got == 0
                    self.stats.trailing_after_end += got
                    have += got
                self._after_end()
                return
            consumed = done
            rest = have - consumed
            if eof:
                return
            if consumed == 0 and rest >= cap:
                raise InputError(f"{self.path}: no complete frame in {rest:,} bytes at stream offset {base:,}")
            if consumed == 0:  # no chunk handed out (a short read): read on into this buffer, which
                continue       # the caller does not hold (the next one it may still hold)
            turn += 1
            nxt = bufs[turn % buffers]
            nxt[:rest] = buf[consumed:have]  # the partial last frame starts the next buffer
            buf, view = nxt, memoryview(nxt)
            base += consumed
            have = rest

    def _check_start(self, buf: np.ndarray, have: int) -> None:
        """The first frame must be a defined ITCH type with its spec length."""
        if have < 3:
            raise InputError(f"{self.path}: not an ITCH 5.0 file: {have} byte(s), too short for a frame")
        length = (int(buf[0]) << 8) | int(buf[1])
        t = int(buf[2])
        spec = core.itch_length(t)
        if spec == 0 or spec != length:
            shown = bytes(buf[:8]).hex(" ")
            raise InputError(
                f"{self.path}: not an ITCH 5.0 file: expected a 2-byte big-endian length and a message "
                f"type at byte 0 (e.g. 00 0c 53 for a System Event), found {shown}")

    def _walk(self, buf: np.ndarray, have: int, base: int, *, final: bool, frames: tuple[np.ndarray, np.ndarray]):
        """Frame buf[:have] into frames (offsets, types: room for have // 3 + 1, the most
        frames that fit); yield chunks that view them; return bytes consumed (None at an
        end marker)."""
        offsets, types = frames
        counts = np.zeros(256, np.uint64)
        st, n, consumed, end, bad = core.itch_frames(buf, have, offsets, types, counts)
        if n:
            self.stats.messages += n
            for t in np.flatnonzero(counts).tolist():
                self.stats.by_type[chr(t)] += int(counts[t])
            yield Chunk(buf, offsets[:n], types[:n], base, self.stats.messages - n, counts)
        self.stats.bytes = base + consumed
        if st == core.lib.LOB_EFRAME:
            t = int(buf[bad + 2])
            length = (int(buf[bad]) << 8) | int(buf[bad + 1])
            spec = core.itch_length(t)
            said = f"ITCH 5.0 says {spec}" if spec else "less than the 11-byte header of every ITCH 5.0 message"
            raise InputError(
                f"{self.path}: corrupt frame at {self._at(base + bad)} (message {self.stats.messages:,}): "
                f"type {chr(t)!r} has length {length}, {said}")
        if end:
            self.stats.end_marker = True
            self.stats.end_marker_offset = base + consumed - 2
            self.stats.trailing_after_end = have - consumed
            return None
        if final and consumed < have:
            self.stats.truncated_offset = base + consumed
            self.stats.truncated_bytes = have - consumed
            if not self.allow_truncated:
                need = 2 + ((int(buf[consumed]) << 8) | int(buf[consumed + 1])) if have - consumed >= 2 else 2
                raise InputError(
                    f"{self.path}: truncated: the message at {self._at(base + consumed)} needs {need} bytes, "
                    f"the file ends after {have - consumed} (use --allow-truncated to stop there and count it)")
        return consumed

    # ---- pcap / MoldUDP64 ----

    def _pcap_payload(self, data: bytes) -> bytes:
        endian, _ = PCAP_MAGICS[data[:4]]
        if len(data) < 24:
            raise InputError(f"{self.path}: truncated pcap header ({len(data)} bytes, expected 24)")
        linktype = struct.unpack(endian + "I", data[20:24])[0]
        if linktype != 1:
            raise InputError(f"{self.path}: pcap link type {linktype}, expected 1 (Ethernet)")
        out, packets = [], []
        pos = 24
        while pos < len(data):
            incl = struct.unpack(endian + "I", data[pos + 8:pos + 12])[0] if pos + 16 <= len(data) else None
            if incl is None or pos + 16 + incl > len(data):  # a capture cut short
                if self.allow_truncated:  # every whole packet before it; counted
                    self.stats.truncated_offset, self.stats.truncated_bytes = pos, len(data) - pos
                    break
                what = "record header" if incl is None else f"record: expected {incl} bytes, {len(data) - pos - 16} left"
                raise InputError(f"{self.path}: truncated pcap {what} at byte {pos:,} (--allow-truncated reads "
                                 "every packet before it)")
            frame = data[pos + 16:pos + 16 + incl]
            pkt = pos
            pos += 16 + incl
            hit = _udp_payload(frame)
            if hit is None or len(hit[1]) < 20:
                self.stats.mold_other_frames += 1  # not UDP over IPv4: not ours
                continue
            at, udp = hit
            sess, seq, count = udp[:10], int.from_bytes(udp[10:18], "big"), int.from_bytes(udp[18:20], "big")
            self.stats.mold_packets += 1
            if count in (0, 0xFFFF):
                self.stats.mold_heartbeats += 1  # heartbeat / end of session
                continue
            blocks, p, starts = udp[20:], 0, []
            for _ in range(count):
                n = int.from_bytes(blocks[p:p + 2], "big") if p + 2 <= len(blocks) else -1
                if n < 0 or p + 2 + n > len(blocks):
                    orig = struct.unpack(endian + "I", data[pkt + 12:pkt + 16])[0]
                    raise InputError(
                        f"{self.path}: MoldUDP64 packet at byte {pkt:,} (sequence {seq}) announces {count} "
                        f"messages but ends inside message {len(starts) + 1}"
                        + (f" (the capture kept {incl} of its {orig} bytes: its snap length)" if orig > incl else ""))
                starts.append(p)
                p += 2 + n
            packets.append((pkt, pkt + 16 + at + 20, sess, seq, count, blocks, starts, p))
        self._sequence(packets, out)
        if not out:
            raise InputError(f"{self.path}: no MoldUDP64 messages found in the pcap")
        return b"".join(out)

    def _sequence(self, packets: list, out: list) -> None:
        """The packets' message blocks into out in sequence order as received, each sequence
        anomaly counted (stats.mold_*), the first of each kind kept with its byte and sequence.

        A packet whose sequence number is the one expected is taken. One that repeats what
        the session already showed is dropped (its new messages kept, if it only starts
        there). Otherwise the packet is judged against its neighbours: a sequence number
        that agrees with neither the one expected nor the next packet's (its sequence plus
        its count is not the next packet's) is damage to that packet's header: the packet
        is dropped and counted, and the expected sequence moves only past the messages that
        packet is known to have held (when the next packet follows them), so that the
        packets after it are read as before. A jump that the next packet agrees with is a
        gap (forward: those messages are missing) or a new start (back before anything
        the session showed). Too much lost (MAX_LOSS_SHARE) is an error unless allow_gaps."""
        st = self.stats
        expected = low = session = None
        self._pieces, payload = [], 0
        for i, (pkt, at, sess, seq, count, blocks, starts, end) in enumerate(packets):
            if sess != session:  # (a new session numbers its messages from 1 again)
                st.mold_sessions.append(sess.decode("ascii", "replace").strip())
                session, expected, low = sess, None, None
            nxt = packets[i + 1][3] if i + 1 < len(packets) and packets[i + 1][2] == sess else None
            first = 0
            if expected is not None and seq != expected:
                seen = low <= seq < expected
                if seen and seq + count <= expected:  # a repeated packet: all of it read already
                    st.mold_duplicates += 1
                    st.mold_note("repeated", pkt, seq, expected)
                    continue
                if seen:  # (it starts with messages already read: the rest are new)
                    st.mold_duplicates += 1
                    st.mold_note("repeated", pkt, seq, expected)
                    first = starts[expected - seq]
                    seq, count = expected, seq + count - expected
                elif nxt is not None and seq + count != nxt:  # agrees with neither neighbour
                    st.mold_damaged += 1
                    st.mold_damaged_messages += count
                    st.mold_note("damaged", pkt, seq, expected, nxt)
                    if nxt == expected + count:  # (the next packet says it held the messages expected)
                        expected = nxt
                    continue
                elif seq > expected:
                    st.mold_gaps.append((expected, seq))
                    st.mold_missing += seq - expected
                    st.mold_note("gap", pkt, seq, expected)
                else:  # back before the session's first message seen: a new start (nothing lost)
                    st.mold_back += 1
                    st.mold_note("back", pkt, seq, expected)
                    low = seq
            if low is None:
                low = seq
            expected = seq + count
            st.mold_kept += count
            self._pieces.append((payload, at + first))  # (where its messages are in the file)
            payload += end - first
            out.append(blocks[first:end])
        lost = st.mold_lost()
        if lost and not self.allow_gaps and lost > MAX_LOSS_SHARE * (lost + st.mold_kept):
            kind, f = min(((k, st.mold_first[k]) for k in ("damaged", "gap") if k in st.mold_first),
                          key=lambda kf: kf[1]["byte"])
            raise InputError(
                f"{self.path}: MoldUDP64: {lost:,} of {lost + st.mold_kept:,} messages lost to sequence anomalies "
                f"(more than {MAX_LOSS_SHARE:.0%}); the first {mold_first_text(kind, f)}; --allow-gaps replays "
                "what is left, counted")


_MOLD_KINDS = {"damaged": "packet(s) with a damaged sequence number dropped",
               "gap": "sequence gap(s)", "repeated": "repeated packet(s) dropped (their messages read already)",
               "back": "sequence jump(s) back before the session's first sequence (read as a new start)"}


def mold_first_text(kind: str, f: dict) -> str:
    """Where the first anomaly of a kind was, in words."""
    nxt = f" and the next packet's {f['next_packet_sequence']}" if "next_packet_sequence" in f else ""
    return f"packet at byte {f['byte']:,} of the capture: sequence {f['sequence']}, expected {f['expected']}{nxt}"


def mold_notes(m: dict | None) -> list[str]:
    """A line for each kind of sequence anomaly in a summary's `moldudp64` (ReadStats.moldudp64),
    with its count and its first packet; [] if none."""
    if not m:
        return []
    counts = {"damaged": (m.get("damaged_dropped", 0), f"{m.get('damaged_messages', 0):,} messages lost"),
              "gap": (len(m["gaps"]), f"{m.get('messages_missing', 0):,} messages missing"),
              "repeated": (m["duplicates_dropped"], None), "back": (m.get("went_back", 0), None)}
    out = []
    for kind, (n, extra) in counts.items():
        if n and kind in m.get("first", {}):
            out.append(f"MoldUDP64: {n:,} {_MOLD_KINDS[kind]}" + (f", {extra}" if extra else "")
                       + f"; the first {mold_first_text(kind, m['first'][kind])}")
    return out


def _frame_arrays(nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and types for the frames of nbytes (a frame is at least 3 bytes). Pages
    are touched only as far as frames are written."""
    return np.empty(nbytes // 3 + 1, np.uint32), np.empty(nbytes // 3 + 1, np.uint8)


def _udp_payload(frame: bytes) -> tuple[int, bytes] | None:
    """Ethernet (with any 802.1Q tags) / IPv4 / UDP -> (its offset in the frame, the UDP
    payload), or None."""
    p = 12
    ethertype = int.from_bytes(frame[p:p + 2], "big")
    while ethertype in (0x8100, 0x88A8):
        p += 4
        ethertype = int.from_bytes(frame[p:p + 2], "big")
    p += 2
    if ethertype != 0x0800 or len(frame) < p + 20:
        return None
    ihl = (frame[p] & 0x0F) * 4
    if frame[p + 9] != 17:
        return None
    udp = p + ihl
    length = int.from_bytes(frame[udp + 4:udp + 6], "big")
    return udp + 8, frame[udp + 8:udp + length]


class _CountingReader(io.RawIOBase):
    """A raw file that counts the bytes read through it (the progress bar's position;
    the file's SHA-256 is lobreplay.reports.tables.file_sha256, on its own reads)."""

    def __init__(self, f: BinaryIO):
        self.f = f
        self.position = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self.f.readinto(b)
        if n:
            self.position += n
        return n

    def close(self) -> None:
        self.f.close()
        super().close()
