// Agent API calls are counted per tenant and operation for /api/activity/tools,
// in memory and written once a second in one statement (no hot row per call),
// and the rest when the app closes.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../../core/db/pool.ts';
import { createRegistration } from '../../../../core/identity/registrations.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { agentAccessToken } from '../../../helpers/principals.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl);
const { registration } = await createRegistration(db, { type: 'anonymous', ip: '10.9.1.1', claimTokenTtlS: 600 });
const token = await agentAccessToken(app, config, registration, ['svc:boards:read']);
const uses = () =>
  db.maybeOneFirst(sql.type(z.object({ uses: z.number() }))`
  select uses from tool_uses where tenant_id = ${registration.tenant_id} and tool = 'agent:getAgentMe'`);
const me = () => app.inject({ url: '/api/agent/v1/me', headers: { authorization: `Bearer ${token}` } });

t.test('answered calls are counted within a second, refused ones not at all, the rest at close', async (t) => {
  for (let i = 0; i < 3; i++) t.equal((await me()).statusCode, 200);
  t.equal((await app.inject({ url: '/api/agent/v1/me' })).statusCode, 401, 'a refused call');
  await waitFor('three uses written', async () => (await uses()) === 3);
  t.equal((await me()).statusCode, 200);
  await app.close();
  t.equal(await uses(), 4, 'the last count was written when the app closed');
});
