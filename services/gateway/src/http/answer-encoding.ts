import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { Request, Response } from 'express';
import { chunkReclaimer } from '@fleet/service-kit';

const gzipAsync = promisify(gzip);

/**
 * Answers from this size on are sent gzip-compressed to a client that accepts it. A page of a
 * thousand meter records is about 600 KB of JSON and shrinks several times over; writing those
 * bytes to the socket costs more than compressing them. Below this size the saving is a
 * packet or two, not worth the compression's CPU on the path every command takes.
 */
export const COMPRESS_FROM_BYTES = 8 * 1024;

/**
 * Level 1: on JSON of this kind it keeps most of the saving of the default level (6) at a
 * fraction of its CPU, and the gateway's CPU is what every other request shares.
 */
const GZIP_OPTIONS = { level: 1 };

/**
 * A large answer (a page of meter records relayed as its owner wrote it) is a buffer outside the
 * JavaScript heap, freed only by a collection, and relaying it allocates next to nothing on the
 * heap: a young collection every few megabytes of such answers frees them before they pile up
 * into full collections, with the young generation's trigger left at V8's own for the small
 * answers of every other request.
 */
const reclaimLargeAnswers = chunkReclaimer();

/**
 * Writes a JSON answer (its text, or its bytes as a service wrote them), gzip-compressed when the
 * answer is large and the request's Accept-Encoding prefers gzip to identity (negotiated by
 * express, q-values included). Every answer whose form depends on that header says so in `Vary`.
 * A small text goes as it is: Node writes it in one piece with the headers.
 */
export async function sendJson(req: Request, res: Response, body: string | Buffer): Promise<void> {
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  const size = typeof body === 'string' ? Buffer.byteLength(body, 'utf8') : body.byteLength;
  if (size < COMPRESS_FROM_BYTES) {
    res.send(body);
    return;
  }
  reclaimLargeAnswers(size);
  res.vary('Accept-Encoding');
  if (req.acceptsEncodings('gzip', 'identity') !== 'gzip') {
    res.send(body);
    return;
  }
  const compressed = await gzipAsync(body, GZIP_OPTIONS);
  res.setHeader('Content-Encoding', 'gzip');
  res.send(compressed);
}
