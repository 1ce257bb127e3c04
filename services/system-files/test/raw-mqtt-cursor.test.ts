import { ValidationError } from '@fleet/service-kit';
import { decodeRawCursor, encodeRawCursor } from '../src/domain/raw-cursor';
import { headerTopic } from '../src/history/device-in-history';

describe('raw read cursors', () => {
  it('come back to the position they were issued at, URL-safe', () => {
    const cursor = encodeRawCursor(123456, 'light/+/status');
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(cursor.length).toBeLessThanOrEqual(512);
    expect(decodeRawCursor(cursor, 'light/+/status')).toBe(123456);
    expect(decodeRawCursor(encodeRawCursor(0, '#'), '#')).toBe(0);
  });

  it('stay short for the longest filters', () => {
    expect(encodeRawCursor(Number.MAX_SAFE_INTEGER, 'x'.repeat(512)).length).toBeLessThan(100);
  });

  it('are refused with another filter', () => {
    const cursor = encodeRawCursor(7, 'light/0123456789AB/#');
    expect(() => decodeRawCursor(cursor, 'light/0123456789AB/tele/#')).toThrow(/another topic filter/);
  });

  it('are refused when they are not a raw read cursor', () => {
    for (const text of ['abc', Buffer.from('r1:12').toString('base64url'), Buffer.from('m1:-1:AAAAAAAAAAAAAAAA').toString('base64url')]) {
      expect(() => decodeRawCursor(text, '#')).toThrow(ValidationError);
    }
  });
});

describe('topics read from capture headers', () => {
  it('are taken as they are, or decoded when the bridge had to encode CR or LF', () => {
    expect(headerTopic('light/0123456789AB/tele/50%')).toBe('light/0123456789AB/tele/50%');
    expect(headerTopic('odd%0Atopic%25')).toBe('odd\ntopic%');
  });
});
