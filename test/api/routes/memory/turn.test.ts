// Memory and skills reach the model: what the local provider server received,
// and the offline model answering from memory (a change shows in the next answer).
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { startFakeOpenAI } from '../../../helpers/fake-providers.ts';
import { createMember, withOwnOpenAIKey } from '../../../helpers/fixtures.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { startTestWorker } from '../../../helpers/worker.ts';

const openai = await startFakeOpenAI({ apiKey: 'sk-tenant-key-1234' });
t.teardown(() => openai.close());
const skillsDir = mkdtempSync(path.join(tmpdir(), 'skills-turn-'));
t.teardown(() => rmSync(skillsDir, { recursive: true, force: true }));
mkdirSync(path.join(skillsDir, 'haiku'));
writeFileSync(
  path.join(skillsDir, 'haiku', 'SKILL.md'),
  '---\nname: haiku\ndescription: Answers in haiku.\n---\nAlways answer as a haiku of 5-7-5 syllables.\n',
);

const databaseUrl = await createTestDatabase(t);
const overrides = { OPENAI_BASE_URL: openai.url, SKILLS_DIR: skillsDir };
const { app, db, config } = await buildTestApp(t, databaseUrl, overrides);
await startTestWorker(t, databaseUrl, overrides);
const member = await createMember(db, 'admin');
await withOwnOpenAIKey(db, config, member, 'sk-tenant-key-1234');
const headers = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };

let n = 0;
async function turn(model: string, message: string): Promise<string> {
  const sessionId = (
    await app.inject({ method: 'POST', url: '/api/chat/sessions', headers, payload: { model } })
  ).json().id as string;
  const sent = await app.inject({
    method: 'POST',
    url: '/api/chat/send',
    headers: { ...headers, 'idempotency-key': `memory-turn-${++n}` },
    payload: { sessionId, message },
  });
  t.equal(sent.statusCode, 202);
  const { jobId } = sent.json();
  await waitFor('the turn to finish', async () => {
    const status = await db.oneFirst(
      sql.type(z.object({ status: z.string() }))`select status from jobs where id = ${jobId}`,
    );
    return ['succeeded', 'failed'].includes(status) ? status : null;
  });
  return db.oneFirst(
    sql.type(z.object({ content: z.string() }))`select content from chat_messages where job_id = ${jobId}`,
  );
}
const remember = (content: string) =>
  app.inject({
    method: 'POST',
    url: '/api/memory/content',
    headers,
    payload: { filename: 'facts.md', content, mode: 'replace' },
  });

t.test('memory and configured, published skills are in the system message the provider receives', async (t) => {
  await turn('openai/gpt-4o-mini', 'Hi');
  t.notOk(
    openai.requests.at(-1)!.messages!.some((m) => m.role === 'system'),
    'nothing to add yet',
  );

  t.equal((await remember('The secret word is PAPAYA.')).statusCode, 200);
  await app.inject({ method: 'POST', url: '/api/skills/sync', headers });
  const skillId = (await app.inject({ url: '/api/skills/all', headers })).json().items[0].id;
  await turn('openai/gpt-4o-mini', 'Hello again');
  let system = openai.requests.at(-1)!.messages!.find((m) => m.role === 'system')!.content;
  t.match(system, /## Memory[\s\S]*### facts.md\nThe secret word is PAPAYA\./);
  t.notMatch(system, /haiku/, 'an unpublished skill is not offered');

  await app.inject({ method: 'POST', url: `/api/skills/${skillId}/publish`, headers });
  await app.inject({
    method: 'PUT',
    url: `/api/skills/${skillId}/env-schema`,
    headers,
    payload: { fields: [{ name: 'STYLE', required: true }] },
  });
  await turn('openai/gpt-4o-mini', 'And now?');
  system = openai.requests.at(-1)!.messages!.find((m) => m.role === 'system')!.content;
  t.notMatch(system, /haiku/, 'a skill missing required configuration is not offered');
  await app.inject({
    method: 'POST',
    url: `/api/skills/${skillId}/configure`,
    headers,
    payload: { values: { STYLE: 'classic' } },
  });
  await turn('openai/gpt-4o-mini', 'And now?');
  system = openai.requests.at(-1)!.messages!.find((m) => m.role === 'system')!.content;
  t.match(system, /## Skills[\s\S]*### haiku\nAnswers in haiku\.\n\nAlways answer as a haiku/);
  t.notMatch(system, /classic/, 'configuration values never reach the model');
  const tools = await db.oneFirst(
    sql.type(
      z.object({ uses: z.number() }),
    )`select uses from tool_uses where tenant_id = ${member.tenantId} and tool = 'skill:haiku'`,
  );
  t.equal(tools, 1, 'the turn that offered the skill counts as a use');
});

t.test('the offline model answers from memory, and a change shows in the next answer', async (t) => {
  t.match(await turn('builtin/offline', 'What is in your memory?'), /From memory: ".*The secret word is PAPAYA\./);
  await remember('The secret word is MANGO.');
  t.match(await turn('builtin/offline', 'What do you remember?'), /MANGO/);
  t.match(await turn('builtin/offline', 'Which skills do you have?'), /Skills I can use: haiku\./);
  await app.inject({ method: 'POST', url: '/api/memory/config', headers, payload: { enabled: false } });
  t.match(await turn('builtin/offline', 'What is in your memory?'), /memory is empty \(or switched off\)/);
});
