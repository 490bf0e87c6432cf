// What every route may use: the configuration, the database pool, the job
// event hub and the group committer. The process entry (or a test) owns them
// and closes them after the app.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../../core/config.ts';
import type { DatabasePool } from '../../core/db/pool.ts';
import type { JobEventHub } from '../../core/jobs/events.ts';
import type { GroupCommitter } from '../../core/jobs/group-commit.ts';
import { KeyStore } from '../../core/identity/keys.ts';
import { applyPlanLimits } from '../../core/jobs/plan-limits.ts';

export type AppContext = {
  config: Config;
  db: DatabasePool;
  jobEvents: JobEventHub;
  jobs: GroupCommitter;
};

declare module 'fastify' {
  interface FastifyInstance extends AppContext {
    shuttingDown: boolean;
    /** The identity provider's signing keys (shared by every replica through PostgreSQL). */
    idpKeys: KeyStore;
  }
}

async function context(app: FastifyInstance, ctx: AppContext) {
  // Fair-order weights and quotas of the plans, when configured (PLAN_*).
  await applyPlanLimits(ctx.db, ctx.config.planLimits);
  app.decorate('config', ctx.config);
  app.decorate('db', ctx.db);
  app.decorate('jobEvents', ctx.jobEvents);
  app.decorate('jobs', ctx.jobs);
  app.decorate('shuttingDown', false);
  app.decorate(
    'idpKeys',
    new KeyStore(ctx.db, ctx.config.secrets.DATA_ENCRYPTION_KEY, ctx.config.identity.assertionTtlS),
  );
  app.addHook('preClose', async () => {
    app.shuttingDown = true;
  });
}

export default fp(context, { name: 'context' });
