// Where data is kept: PostgreSQL, and the files under DATA_DIR.
import { group, setting } from '../declare.ts';
import { intFromEnv, nonEmpty, postgresUrl } from '../parsers.ts';

export const database = group('Database and files', undefined, {
  DATABASE_URL: setting(postgresUrl, {
    doc: 'PostgreSQL connection string; unset means the embedded PostgreSQL (`npm start`, `npm run migrate`)',
  }),
  DB_POOL_MAX: setting(intFromEnv(1, 200), { default: 10, doc: 'Connections per api process' }),
  EMBEDDED_PG_PORT: setting(intFromEnv(0, 65535), {
    default: 0,
    doc: 'Port of the embedded PostgreSQL; `0` picks a free one',
  }),
  DATA_DIR: setting(nonEmpty, {
    default: '.data',
    doc: 'Embedded PostgreSQL cluster and generated development secrets',
  }),
  SKILLS_DIR: setting(nonEmpty, {
    shown: '`DATA_DIR/skills`',
    doc: 'The directory `POST /api/skills/sync` reads (see [The agent workspace](workspace.md#skills))',
  }),
});
