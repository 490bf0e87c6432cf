// storableText and its deep and streaming variants: what PostgreSQL's text
// and jsonb refuse (NUL, a lone surrogate) is dropped or replaced, and clean
// text comes back as itself.
import t from 'tap';
import { storableJson, storableStream, storableText, storableTextOrNull } from '../../core/storable.ts';

t.test('storableText drops NUL and replaces lone surrogates with U+FFFD', async (t) => {
  t.equal(storableText('before\u0000after'), 'beforeafter');
  t.equal(storableText('half \ud800 pair'), 'half \ufffd pair');
  t.equal(storableText('low \udc00 alone'), 'low \ufffd alone');
  t.equal(storableText('\udc00\ud800'), '\ufffd\ufffd', 'a low before a high is two halves, not a pair');
  t.equal(storableText('end \ud83d'), 'end \ufffd');
  t.equal(storableText('\u0000\ud800\u0000'), '\ufffd');
  const clean = 'smile \ud83d\ude00 and ünïcödé';
  t.equal(storableText(clean), clean, 'a whole pair stays');
  t.equal(storableText(''), '');
  t.equal(storableTextOrNull(null), null);
  t.equal(storableTextOrNull(undefined), null);
  t.equal(storableTextOrNull('a\u0000'), 'a');
});

t.test('storableJson mends strings and property names at any depth', async (t) => {
  const value = {
    text: 'a\u0000b',
    'key\u0000': ['half \ud800', { deep: [['x\udfff']] }],
    pair: '\ud83d\ude00',
    backslash: '\\u0000 is only text here, \\ud800 too',
    n: 1,
    ok: true,
    nothing: null,
  };
  t.same(storableJson(value), {
    text: 'ab',
    key: ['half \ufffd', { deep: [['x\ufffd']] }],
    pair: '\ud83d\ude00',
    backslash: '\\u0000 is only text here, \\ud800 too',
    n: 1,
    ok: true,
    nothing: null,
  });
  const clean = { a: ['b', { c: 'd\\u0000' }] };
  t.equal(storableJson(clean), clean, 'a clean value is returned as itself');
  t.equal(storableJson('x\u0000'), 'x');
  t.equal(storableJson(7), 7);
  t.equal(storableJson(null), null);
  let deep: unknown = 'bottom\u0000';
  for (let i = 0; i < 1000; i++) deep = [deep];
  let bottom = storableJson(deep);
  for (let i = 0; i < 1000; i++) bottom = (bottom as unknown[])[0];
  t.equal(bottom, 'bottom');
});

t.test('storableStream keeps half a pair back until the next piece', async (t) => {
  const mend = storableStream();
  t.equal(mend('smile \ud83d'), 'smile ', 'the high half waits');
  t.equal(mend('\ude00 ok'), '\ud83d\ude00 ok', 'and joins its low half');
  t.equal(mend('cut \ud83d'), 'cut ');
  t.equal(mend(' no pair'), '\ufffd no pair', 'a high half followed by no low one');
  t.equal(mend('nul\u0000 \ud800', true), 'nul \ufffd', 'the last piece lets everything go');
  t.equal(mend('', true), '');
});
