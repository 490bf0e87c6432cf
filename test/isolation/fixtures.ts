// Tenant A's resources for the isolation suite, made through the API as A
// would make them, and the values that must never reach another tenant.
import type { FastifyInstance } from 'fastify';
import { signRequest } from '../../api/plugins/hmac-signature.ts';
import { Keyring } from '../../core/crypto/keyring.ts';
import type { DatabasePool } from '../../core/db/pool.ts';
import { storeGrant } from '../../core/partner-accounts/accounts.ts';
import type { Workspace } from '../helpers/principals.ts';

export type Resources = {
  /** Path and query parameter name -> A's value (ids and names of A's resources). */
  byParam: Record<string, string>;
  /** Strings of A's that must appear in no answer to another caller. */
  secrets: string[];
};

export async function createResources(app: FastifyInstance, db: DatabasePool, a: Workspace): Promise<Resources> {
  const admin = { authorization: `Bearer ${a.admin.token}`, 'x-tenant-id': a.tenantId };
  const agent = (key: string) => ({ authorization: `Bearer ${a.agent.token}`, 'idempotency-key': `isolation-${key}` });
  const call = async (
    method: 'POST' | 'PUT',
    url: string,
    payload: object,
    headers: Record<string, string> = admin,
  ) => {
    const res = await app.inject({ method, url, headers, payload });
    if (res.statusCode >= 300) throw new Error(`fixture ${method} ${url}: ${res.statusCode} ${res.body}`);
    return res.json() as Record<string, string>;
  };
  const company = (await call('POST', '/api/companies', { name: 'A-company-secret-name' })).id!;
  const companyAgent = (await call('POST', `/api/companies/${company}/agents`, { name: 'A-agent-secret-name' })).id!;
  const task = (await call('POST', `/api/companies/${company}/tasks`, { title: 'A-task-secret-title' })).id!;
  const board = (
    await call(
      'POST',
      '/api/agent/v1/boards',
      { title: 'A-board-secret-title', scope_type: 'company', scope_id: company, content: { widgets: [] } },
      agent('board'),
    )
  ).id!;
  const publish = await call(
    'POST',
    `/api/agent/v1/boards/${board}/publish`,
    { visibility: 'public' },
    agent('publish'),
  );
  const approval = publish.approval_id ?? (publish as unknown as { approval?: { id: string } }).approval?.id;
  const session = (await call('POST', '/api/chat/sessions', { title: 'A-session-secret-title' })).id!;
  const sent = await call(
    'POST',
    '/api/chat/send',
    { sessionId: session, message: 'A-message-secret-text' },
    { ...admin, 'idempotency-key': 'isolation-send-1' },
  );
  const managed = (await call('POST', '/api/managed-agents', { name: 'A-managed-secret-name' })).id!;
  await call('POST', '/api/memory/content', { filename: 'a-notes.md', content: 'A-memory-secret-content' });
  const signingKey = (
    await app.inject({ url: '/api/provider-keys/signing-key', headers: { authorization: `Bearer ${a.admin.token}` } })
  ).json().signingKey;
  const keyBody = JSON.stringify({ apiKey: 'sk-A-provider-secret-key-000111' });
  const keyRes = await app.inject({
    method: 'PUT',
    url: '/api/provider-keys/openai',
    headers: {
      ...admin,
      ...signRequest(signingKey, 'PUT', '/api/provider-keys/openai', a.tenantId, keyBody),
      'content-type': 'application/json',
    },
    payload: keyBody,
  });
  if (keyRes.statusCode >= 300) throw new Error(`fixture provider key: ${keyRes.statusCode} ${keyRes.body}`);
  const contact = (
    await app.inject({
      method: 'POST',
      url: '/api/contact/',
      remoteAddress: '10.66.0.1',
      payload: { name: 'A', email: 'a@example.test', message: 'A-contact-secret' },
    })
  ).json().id;
  // A connected partner account of A's admin (its grant stored as the callback stores one; the provider is not reachable here).
  const partnerAccount = await db.transaction((tx) =>
    storeGrant(tx, Keyring.fromConfig(app.config), {
      tenantId: a.tenantId,
      userId: a.admin.userId,
      subject: 'A-partner-subject',
      email: 'a-partner@example.test',
      services: ['calendar'],
      grantedScopes: ['openid', 'svc.calendar.read'],
      accessToken: 'A-partner-secret-access',
      refreshToken: 'A-partner-secret-refresh',
      expiresInS: 3600,
    }),
  );
  const invitation = (
    await call('POST', '/api/tenants/invitations', { email: 'a-invitee@example.test', role: 'member' })
  ).id!;
  const byParam: Record<string, string> = {
    tenantId: a.tenantId,
    companyId: company,
    companyRef: company,
    agentId: companyAgent,
    taskId: task,
    taskRef: task,
    boardId: board,
    sessionId: session,
    jobId: sent.jobId!,
    runnerId: a.runner.runnerId,
    agentRef: managed,
    provider: 'openai',
    filename: 'a-notes.md',
    accountId: partnerAccount,
    registrationId: a.agent.registrationId,
    invitationId: invitation,
    userId: a.member.userId,
    ...(approval ? { approvalId: approval } : {}),
  };
  return {
    byParam,
    secrets: [
      a.tenantId,
      company,
      companyAgent,
      task,
      board,
      session,
      sent.jobId!,
      managed,
      'A-company-secret-name',
      'A-agent-secret-name',
      'A-task-secret-title',
      'A-board-secret-title',
      'A-session-secret-title',
      'A-message-secret-text',
      'A-memory-secret-content',
      'A-provider-secret',
      partnerAccount,
      'A-partner-secret',
      'a-partner@example.test',
      'a-invitee@example.test',
      invitation,
      ...(contact ? [String(contact)] : []),
    ],
  };
}
