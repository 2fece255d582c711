import { describe, expect, test } from 'vitest';
import { parseLosslessJson, stringifyLosslessJson } from '../src/catalog/lossless-json.js';
import { metadataAnswerText, render } from '../src/http/answer.js';

// Answers that carry a table's or view's metadata are written from the metadata's stored text
// (metadataAnswerText): they must be the very text that rendering the whole value writes, or a replay, an ETag
// or a client comparing answers would see two texts for one answer.
const metadata = parseLosslessJson(
  '{"format-version":2,"table-uuid":"9c12d441-03fe-4693-9a96-5a6c1ad4b0e1","location":"file:///w/t\\"q\\u2028",' +
    '"current-snapshot-id":9223372036854775807,"snapshots":[{"snapshot-id":-9223372036854775808,"x":1.5e-7}],' +
    '"properties":{"__proto__":"p","é":"ü\\u0000"},"schemas":[],"n":[true,false,null,{}]}',
  { maxDepth: 64 },
) as Record<string, unknown>;
const text = stringifyLosslessJson(metadata);

describe('metadataAnswerText', () => {
  for (const location of ['file:///w/t/metadata/00001-x.metadata.json', 'file:///w/"quoted"\\/ü\u2028', '']) {
    test(`a load result and a commit's answer at ${JSON.stringify(location)}`, () => {
      expect(metadataAnswerText(location, text, true)).toBe(
        stringifyLosslessJson({ 'metadata-location': location, metadata, config: {} }),
      );
      expect(metadataAnswerText(location, text, false)).toBe(
        stringifyLosslessJson({ 'metadata-location': location, metadata }),
      );
    });
  }

  test('render writes the text an answer carries, and the body otherwise', () => {
    const body = { 'metadata-location': 'l', metadata };
    expect(render({ status: 200, body, text: metadataAnswerText('l', text, false) }).body).toBe(
      render({ status: 200, body }).body,
    );
  });
});
