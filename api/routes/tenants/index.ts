// Tenants: create (creator becomes Admin), read (members only), and the
// tenant-scoped writes: integration secrets, sessions, asynchronous jobs.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { TenantRoleSchema } from '../../../core/tenants/roles.ts';
import {
  DIAG_KINDS,
  DiagInputs,
  DiagLimitError,
  enqueueDiagJob,
  TENANT_DIAG_OPEN_LIMIT,
  TenantDiagInputs,
} from '../../../core/jobs/diagnostics.ts';
import { findJobInTenant } from '../../../core/jobs/read.ts';
import { JobStatus, toJobStatus } from '../../../core/jobs/schema.ts';
import { nameSchema } from '../../../core/names.ts';
import { pageOf, PageQuery } from '../../../core/paging.ts';
import {
  createSession,
  createTenant,
  findTenantForMember,
  listTenantsOfMember,
  putTenantSecret,
  TenantLimitError,
} from '../../../core/tenants/tenants.ts';
import { PlatformError, PlatformHttpError, platformCursor } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';

const Settings = z
  .record(z.string(), z.unknown())
  .describe('Tenant settings (defaults: timezone, locale, defaultModel)');
const Tenant = z
  .object({
    id: z.uuid(),
    name: z.string(),
    plan: z.string(),
    settings: Settings,
    memberCount: z.int(),
    role: TenantRoleSchema,
    createdAt: z.iso.datetime(),
  })
  .meta({ id: 'Tenant' });
const TenantListItem = z
  .object({
    id: z.uuid(),
    name: z.string(),
    plan: z.string(),
    role: TenantRoleSchema,
    owned: z.boolean().describe('Whether the caller owns it (it counts for their account)'),
    createdAt: z.iso.datetime(),
  })
  .meta({ id: 'TenantListItem' });
const TenantPage = z
  .object({ items: z.array(TenantListItem), nextCursor: z.string().nullable() })
  .meta({ id: 'TenantPage' });
const CreatedTenant = z.object({ id: z.uuid(), name: z.string(), settings: Settings }).meta({ id: 'CreatedTenant' });
const TenantName = nameSchema();

const tenantRoutes: FastifyPluginAsyncZod = async (app) => {
  const admin = { onRequest: app.requireUser, preValidation: app.requireTenant('admin') };
  const member = { onRequest: app.requireUser, preValidation: app.requireTenant('member') };
  const tenantErrors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };
  const security = [{ PlatformJWT: [] }];

  app.post(
    '/api/tenants/',
    {
      onRequest: app.requireUser,
      schema: {
        operationId: 'createTenant',
        tags: ['tenants'],
        summary: 'Create a tenant; the caller becomes its Admin',
        security,
        body: z.object({ name: TenantName.default('My workspace') }).describe('JSON body; `{}` for the default name'),
        response: { 201: CreatedTenant, 400: PlatformError, 401: PlatformError, 409: PlatformError },
      },
    },
    async (request, reply) => {
      try {
        const tenant = await createTenant(
          app.db,
          request.user!.userId,
          request.body.name,
          app.config.providers.newTenantCreditsMicros,
        );
        return reply.code(201).send({ id: tenant.id, name: tenant.name, settings: tenant.settings });
      } catch (error) {
        if (error instanceof TenantLimitError) throw new PlatformHttpError(409, 'tenant_limit_reached', error.message);
        throw error;
      }
    },
  );

  app.get(
    '/api/tenants/',
    {
      onRequest: app.requireUser,
      schema: {
        operationId: 'listTenants',
        tags: ['tenants'],
        summary: "The caller's tenants (workspaces), newest first, with their role",
        description: 'Keyset pages: pass nextCursor as cursor.',
        security,
        querystring: PageQuery,
        response: { 200: TenantPage, 400: PlatformError, 401: PlatformError },
      },
    },
    async (request) => {
      const after = platformCursor(request.query.cursor);
      const rows = await listTenantsOfMember(app.db, request.user!.userId, { limit: request.query.limit, after });
      const { items, nextCursor } = pageOf(rows, request.query.limit);
      return {
        items: items.map((t) => ({
          id: t.id,
          name: t.name,
          plan: t.plan,
          role: t.role,
          owned: t.owned,
          createdAt: new Date(t.created_at).toISOString(),
        })),
        nextCursor,
      };
    },
  );

  app.get(
    '/api/tenants/:tenantId',
    {
      onRequest: app.requireUser,
      schema: {
        operationId: 'getTenant',
        tags: ['tenants'],
        summary: 'Tenant details with settings and member count (members only)',
        security,
        params: z.object({ tenantId: z.uuid() }),
        response: { 200: Tenant, 400: PlatformError, 401: PlatformError, 404: PlatformError },
      },
    },
    async (request) => {
      const tenant = await findTenantForMember(app.db, request.params.tenantId, request.user!.userId);
      if (!tenant) throw new PlatformHttpError(404, 'not_found', 'No such tenant.');
      return {
        id: tenant.id,
        name: tenant.name,
        plan: tenant.plan,
        settings: tenant.settings,
        memberCount: tenant.member_count,
        role: tenant.role,
        createdAt: tenant.created_at,
      };
    },
  );

  app.post(
    '/api/tenants/secrets',
    {
      ...admin,
      schema: {
        operationId: 'putTenantSecret',
        tags: ['tenants'],
        summary: 'Store (or replace) an encrypted secret for an integration; the value is never returned',
        security,
        headers: TenantHeaders,
        body: z.object({
          name: z
            .string()
            .regex(/^[A-Za-z][A-Za-z0-9_.-]{0,99}$/, 'letters, digits, _ . - ; starting with a letter; at most 100'),
          value: z.string().min(1).max(16_384),
        }),
        response: {
          201: z
            .object({
              name: z.string(),
              createdAt: z.iso.datetime(),
              updatedAt: z.iso.datetime(),
              replaced: z.boolean(),
            })
            .meta({ id: 'TenantSecret' }),
          ...tenantErrors,
        },
      },
    },
    async (request, reply) => {
      const meta = await putTenantSecret(app.db, app.config.secrets.DATA_ENCRYPTION_KEY, {
        tenantId: request.tenant!.id,
        name: request.body.name,
        value: request.body.value,
        userId: request.user!.userId,
      });
      return reply
        .code(201)
        .send({ name: meta.name, createdAt: meta.created_at, updatedAt: meta.updated_at, replaced: !meta.inserted });
    },
  );

  app.post(
    '/api/tenants/sessions',
    {
      ...member,
      schema: {
        operationId: 'createTenantSession',
        tags: ['tenants'],
        summary: 'Create a session in the tenant',
        security,
        headers: TenantHeaders,
        body: z.object({ title: TenantName.optional() }),
        response: {
          201: z.object({ id: z.uuid(), title: z.string(), createdAt: z.iso.datetime() }).meta({ id: 'TenantSession' }),
          ...tenantErrors,
        },
      },
    },
    async (request, reply) => {
      const session = await createSession(app.db, request.tenant!.id, request.user!.userId, request.body.title);
      return reply.code(201).send({ id: session.id, title: session.title, createdAt: session.created_at });
    },
  );

  app.post(
    '/api/tenants/jobs',
    {
      ...admin,
      schema: {
        operationId: 'createTenantJob',
        tags: ['tenants'],
        summary:
          'Start a diagnostic job in the tenant (Admin); follow it with GET /api/jobs/:jobId or the /api/ws websocket',
        description:
          `Kinds: diag.noop (succeeds at once), diag.steps (steps of delayMs with progress; may fail attempts on request), diag.wait (waits ms, as a model stream does). ` +
          `A tenant Admin has small bounds (diag.steps: steps <= 10, delayMs <= 1000, failAttemptsBelow <= 2, retryAfterMs <= 10000; diag.wait: ms <= 10000) ` +
          `and at most ${TENANT_DIAG_OPEN_LIMIT} unfinished diagnostic jobs per account (429 diag_job_limit); the platform operator has the tasks' full bounds. ` +
          "They run as any job does: in the fair order, counted against the plan's open-job limit.",
        security,
        headers: TenantHeaders,
        body: z.object({
          kind: z.enum(DIAG_KINDS),
          input: z
            .record(z.string(), z.unknown())
            .default({})
            .refine((v) => JSON.stringify(v).length <= 16_384, 'input is larger than 16 KiB'),
        }),
        response: { 202: JobStatus, ...tenantErrors, 429: PlatformError },
      },
    },
    async (request, reply) => {
      const operator = request.user!.isOperator;
      const kind = request.body.kind;
      const parsed = (operator ? DiagInputs : TenantDiagInputs)[kind].safeParse(request.body.input);
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        const where = ['body', 'input', ...issue.path.map(String)].join('.');
        throw new PlatformHttpError(
          400,
          'invalid_request',
          `Invalid request: ${where}: ${issue.message}${operator ? '' : " (the bounds of a tenant Admin; see the operation's description)"}.`,
        );
      }
      let job;
      try {
        job = await app.db.transaction((tx) =>
          enqueueDiagJob(tx, { tenantId: request.tenant!.id, kind, input: parsed.data, operator }),
        );
      } catch (error) {
        if (error instanceof DiagLimitError) throw new PlatformHttpError(429, 'diag_job_limit', error.message);
        throw error;
      }
      request.log.info({ jobId: job.id, kind, operator }, 'diagnostic job started');
      const row = await findJobInTenant(app.db, job.id, request.tenant!.id);
      return reply.code(202).header('location', `/api/jobs/${job.id}`).send(toJobStatus(row!));
    },
  );
};

export default tenantRoutes;
