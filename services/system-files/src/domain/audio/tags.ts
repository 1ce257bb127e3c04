/**
 * Metadata tags around the audio of an .mp3: an ID3v2 tag in front (where cover art lives), and
 * at the end ID3v1, APEv1/APEv2, Lyrics3v2 and an appended ID3v2.4 tag. A device plays none of
 * them, yet they take its storage, so the check counts their bytes and skips them when it looks
 * for audio frames.
 */
import type { ByteSource } from './byte-source';

export const ID3V2_HEADER_BYTES = 10;
const ID3V1_BYTES = 128;
const APE_FOOTER_BYTES = 32;
const APE_HAS_HEADER = 0x80000000;
const LYRICS3V2_END_BYTES = 15;

export interface Id3v2Header {
  major: number;
  flags: number;
  /** Bytes after the 10-byte header, footer excluded. */
  bodyBytes: number;
  /** Bytes of the whole tag: header, body and the v2.4 footer when flagged. */
  totalBytes: number;
}

function ascii(bytes: Uint8Array, at: number, length: number): string {
  if (at < 0 || at + length > bytes.length) return '';
  return String.fromCharCode(...bytes.subarray(at, at + length));
}

/** A 28-bit integer of four 7-bit bytes; null when a byte has its top bit set. */
function syncsafe(bytes: Uint8Array, at: number): number | null {
  let value = 0;
  for (let i = 0; i < 4; i++) {
    const b = bytes[at + i];
    if (b === undefined || b & 0x80) return null;
    value = value * 128 + b;
  }
  return value;
}

function u32be(bytes: Uint8Array, at: number): number {
  return ((bytes[at]! << 24) >>> 0) + (bytes[at + 1]! << 16) + (bytes[at + 2]! << 8) + bytes[at + 3]!;
}

function u32le(bytes: Uint8Array, at: number): number {
  return ((bytes[at + 3]! << 24) >>> 0) + (bytes[at + 2]! << 16) + (bytes[at + 1]! << 8) + bytes[at]!;
}

/** The ID3v2 tag header in the first 10 bytes of `head`, or null when there is none. */
export function readId3v2Header(head: Uint8Array): Id3v2Header | null {
  if (ascii(head, 0, 3) !== 'ID3') return null;
  const major = head[3]!;
  const revision = head[4]!;
  if (major < 2 || major > 4 || revision === 0xff) return null;
  const flags = head[5]!;
  const bodyBytes = syncsafe(head, 6);
  if (bodyBytes === null) return null;
  const footer = major === 4 && flags & 0x10 ? ID3V2_HEADER_BYTES : 0;
  return { major, flags, bodyBytes, totalBytes: ID3V2_HEADER_BYTES + bodyBytes + footer };
}

/** Undoes ID3v2 unsynchronisation (every 0xFF 0x00 was written for 0xFF). */
function resynchronise(body: Uint8Array): Uint8Array {
  const out = new Uint8Array(body.length);
  let n = 0;
  for (let i = 0; i < body.length; i++) {
    out[n++] = body[i]!;
    if (body[i] === 0xff && body[i + 1] === 0x00) i++;
  }
  return out.subarray(0, n);
}

/** The frame ids of an ID3v2 tag, in order, as far as they can be read. */
export function id3v2FrameIds(header: Id3v2Header, bodyIn: Uint8Array): string[] {
  const { major, flags } = header;
  // v2.2 compression has no defined method; such a tag cannot be read.
  if (major === 2 && flags & 0x40) return [];
  // Up to v2.3 unsynchronisation covers the whole tag; v2.4 applies it per frame, inside frame sizes.
  const body = major < 4 && flags & 0x80 ? resynchronise(bodyIn) : bodyIn;
  let at = 0;
  if (major >= 3 && flags & 0x40) {
    // Extended header: v2.3 gives its size without the 4 size bytes, v2.4 (syncsafe) with them.
    const size = major === 3 ? u32be(body, 0) + 4 : syncsafe(body, 0);
    if (size === null || body.length < 4) return [];
    at = size;
  }
  const idBytes = major === 2 ? 3 : 4;
  const headerBytes = major === 2 ? 6 : 10;
  const ids: string[] = [];
  while (at + headerBytes <= body.length) {
    const id = ascii(body, at, idBytes);
    if (!/^[A-Z0-9]+$/.test(id)) break; // padding (zeros) or garbage ends the frames
    let size: number;
    if (major === 2) size = (body[at + 3]! << 16) + (body[at + 4]! << 8) + body[at + 5]!;
    // Some taggers wrote plain sizes into v2.4 tags; a byte with its top bit set gives them away.
    else if (major === 4) size = syncsafe(body, at + 4) ?? u32be(body, at + 4);
    else size = u32be(body, at + 4);
    ids.push(id);
    at += headerBytes + size;
  }
  return ids;
}

/** Cover art is an attached picture: APIC (v2.3, v2.4) or PIC (v2.2). */
export function id3v2HasCoverArt(header: Id3v2Header, body: Uint8Array): boolean {
  const picture = header.major === 2 ? 'PIC' : 'APIC';
  return id3v2FrameIds(header, body).includes(picture);
}

/**
 * Bytes of the tag that ends at `end` (the last bytes of `tail`, which ends there too), or 0:
 * ID3v1 "TAG", an APE tag's "APETAGEX" footer, Lyrics3v2's "LYRICS200", an ID3v2.4 "3DI" footer.
 */
export function trailingTagBytes(tail: Uint8Array): number {
  const n = tail.length;
  if (n >= ID3V1_BYTES && ascii(tail, n - ID3V1_BYTES, 3) === 'TAG') return ID3V1_BYTES;
  if (n >= APE_FOOTER_BYTES && ascii(tail, n - APE_FOOTER_BYTES, 8) === 'APETAGEX') {
    const footer = n - APE_FOOTER_BYTES;
    const size = u32le(tail, footer + 12); // items and footer
    const flags = u32le(tail, footer + 20);
    return size + (flags & APE_HAS_HEADER ? APE_FOOTER_BYTES : 0);
  }
  if (n >= LYRICS3V2_END_BYTES && ascii(tail, n - 9, 9) === 'LYRICS200') {
    const digits = ascii(tail, n - LYRICS3V2_END_BYTES, 6);
    if (/^\d{6}$/.test(digits)) return Number(digits) + LYRICS3V2_END_BYTES;
  }
  if (n >= ID3V2_HEADER_BYTES && ascii(tail, n - ID3V2_HEADER_BYTES, 3) === '3DI') {
    const size = syncsafe(tail, n - 4);
    if (size !== null) return size + 2 * ID3V2_HEADER_BYTES;
  }
  return 0;
}

/** The last bytes that tell whether a tag ends there: the whole of an ID3v1 tag, the longest such marker. */
const TAIL_PROBE_BYTES = ID3V1_BYTES;
/** Tags stacked at the end of one file (ID3v1, APE, Lyrics3 and ID3v2 at most once each, with room). */
const MAX_TRAILING_TAGS = 8;

export interface TagLayout {
  /** First byte after the leading ID3v2 tag(s). */
  audioStart: number;
  /** First byte of the trailing tags (the file size when there are none). */
  audioEnd: number;
  tagBytes: number;
  coverArt: boolean;
}

/** Finds the tags at both ends of `source`, reading only their headers and the ID3v2 frames. */
export async function readTagLayout(source: ByteSource): Promise<TagLayout> {
  let audioStart = 0;
  let tagBytes = 0;
  let coverArt = false;
  // Some taggers stack a second ID3v2 tag in front of an older one.
  for (;;) {
    const header = readId3v2Header(await source.read(audioStart, ID3V2_HEADER_BYTES));
    if (!header || audioStart + header.totalBytes > source.size) break;
    const body = await source.read(audioStart + ID3V2_HEADER_BYTES, header.bodyBytes);
    coverArt ||= id3v2HasCoverArt(header, body);
    audioStart += header.totalBytes;
    tagBytes += header.totalBytes;
  }
  let audioEnd = source.size;
  for (let i = 0; i < MAX_TRAILING_TAGS; i++) {
    const probe = Math.min(TAIL_PROBE_BYTES, audioEnd - audioStart);
    if (probe <= 0) break;
    const bytes = trailingTagBytes(await source.read(audioEnd - probe, probe));
    if (bytes <= 0 || bytes > audioEnd - audioStart) break;
    audioEnd -= bytes;
    tagBytes += bytes;
  }
  return { audioStart, audioEnd, tagBytes, coverArt };
}
