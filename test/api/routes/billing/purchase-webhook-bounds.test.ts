// Found by the fuzz suite: a purchase webhook whose event_timestamp_ms lies
// past year 9999 was a 500 (PostgreSQL reads no such timestamp); it is a 400
// now and nothing is stored.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';

const SECRET = 'purchase-webhook-secret-for-bounds-test';
const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl, { PURCHASE_WEBHOOK_SECRET: SECRET });
const stored = () => db.oneFirst(sql.type(z.object({ n: z.number() }))`select count(*)::int as n from billing_events`);
const send = (eventTimestampMs: number) =>
  app.inject({
    method: 'POST',
    url: '/api/billing/purchase-webhook',
    headers: { authorization: `Bearer ${SECRET}` },
    payload: {
      event: { id: `evt-${eventTimestampMs}`, type: 'TEST', app_user_id: null, event_timestamp_ms: eventTimestampMs },
    },
  });

t.test('event_timestamp_ms beyond year 9999 is a 400, nothing stored', async (t) => {
  for (const ms of [5_137_984_525_188_804, 253_402_300_800_000, 8_640_000_000_000_000]) {
    const res = await send(ms);
    t.equal(res.statusCode, 400, `${ms}: ${res.body}`);
    t.match(res.json(), {
      error: 'invalid_request',
      status: 400,
      details: [{ path: 'body.event.event_timestamp_ms' }],
    });
  }
  t.equal(await stored(), 0);
});

t.test('the last millisecond of year 9999 is accepted', async (t) => {
  const res = await send(253_402_300_799_999);
  t.equal(res.statusCode, 200, res.body);
  t.equal(await stored(), 1);
});
