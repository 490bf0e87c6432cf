// Stream deltas on their way through NOTIFY (core/jobs/deltas.ts): joined
// when they continue each other, split to fit a notification, never cutting
// a character in two, and read back exactly.
import t from 'tap';
import { decodeDeltas, encodeDeltas, type Delta } from '../../../core/jobs/deltas.ts';

const job = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

t.test('consecutive deltas of one job and attempt are joined; others stay apart, in order', async (t) => {
  const deltas: Delta[] = [
    { jobId: job(1), attempt: 1, offset: 0, text: 'Hel' },
    { jobId: job(1), attempt: 1, offset: 3, text: 'lo' },
    { jobId: job(2), attempt: 1, offset: 0, text: 'Hi' },
    { jobId: job(1), attempt: 1, offset: 5, text: '!' },
    { jobId: job(1), attempt: 2, offset: 0, text: 'Again' },
  ];
  const payloads = encodeDeltas(deltas);
  t.equal(payloads.length, 1);
  t.same(payloads.flatMap(decodeDeltas), [
    { jobId: job(1), attempt: 1, offset: 0, text: 'Hello' },
    { jobId: job(2), attempt: 1, offset: 0, text: 'Hi' },
    { jobId: job(1), attempt: 1, offset: 5, text: '!' },
    { jobId: job(1), attempt: 2, offset: 0, text: 'Again' },
  ]);
});

t.test('a long text is split to fit NOTIFY, without cutting a surrogate pair, and reads back whole', async (t) => {
  const text = `${'é'.repeat(1_999)}😀${'\u0001'.repeat(3_000)}${'x'.repeat(10_000)}`;
  const payloads = encodeDeltas([{ jobId: job(3), attempt: 1, offset: 10, text }]);
  t.ok(payloads.length > 2, `${payloads.length} notifications`);
  t.ok(
    payloads.every((p) => Buffer.byteLength(p) < 8_000),
    'each under the 8,000-byte limit',
  );
  const back = payloads.flatMap(decodeDeltas);
  t.equal(back.map((d) => d.text).join(''), text, 'the pieces put together are the text');
  let offset = 10;
  for (const d of back) {
    t.equal(d.offset, offset);
    offset += d.text.length;
    const last = d.text.charCodeAt(d.text.length - 1);
    t.notOk(last >= 0xd800 && last <= 0xdbff, 'no piece ends inside a surrogate pair');
  }
});

t.test('what is not a delta is skipped', async (t) => {
  t.same(decodeDeltas('not json'), []);
  t.same(decodeDeltas('{"d":[["id",1,0,"ok"],["id","x",0,"bad"],"junk"]}'), [
    { jobId: 'id', attempt: 1, offset: 0, text: 'ok' },
  ]);
});
