// Skills: sync from the skills directory (bound to the syncing tenant),
// catalog and installed lists, publish, env schema, configuration (secrets
// sealed, shown masked). The retired registration routes answer 410.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { Keyring } from '../../../core/crypto/keyring.ts';
import {
  configureSkill,
  configView,
  getSkillConfig,
  resetSkillConfig,
  SkillConfigInvalidError,
} from '../../../core/skills/config.ts';
import { SkillsDirectoryError } from '../../../core/skills/scan.ts';
import { listSkills, setEnvSchema, setPublished } from '../../../core/skills/skills.ts';
import { syncSkills } from '../../../core/skills/sync.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';
import {
  ConfigureBody,
  EnvSchemaBody,
  InstalledSkill,
  Skill,
  SkillConfig,
  SkillDetail,
  SkillParams,
  SyncResult,
  toSkill,
  toSkillDetail,
} from './schemas.ts';

const notFound = () => new PlatformHttpError(404, 'not_found', 'No such skill in this tenant.');
export const LEGACY_RETIRED = 'legacy_skill_registration_retired';

const skillRoutes: FastifyPluginAsyncZod = async (app) => {
  const keyring = Keyring.fromConfig(app.config);
  const viewer = { onRequest: app.requireUser, preValidation: app.requireTenant('viewer') };
  const admin = { onRequest: app.requireUser, preValidation: app.requireTenant('admin') };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };
  const common = { tags: ['skills'], security: [{ PlatformJWT: [] }], headers: TenantHeaders };

  app.get(
    '/api/skills/catalog',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'listSkillCatalog',
        summary: "Published skills available to the tenant's agents",
        response: { 200: z.object({ items: z.array(Skill) }).meta({ id: 'SkillCatalog' }), ...errors },
      },
    },
    async (request) => ({ items: (await listSkills(app.db, request.tenant!.id, 'published')).map(toSkill) }),
  );

  app.get(
    '/api/skills/list',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'listInstalledSkills',
        summary: 'Installed (published) skills with their configuration state, secrets masked',
        response: { 200: z.object({ items: z.array(InstalledSkill) }).meta({ id: 'InstalledSkillList' }), ...errors },
      },
    },
    async (request) => {
      const tenantId = request.tenant!.id;
      const skills = await listSkills(app.db, tenantId, 'published');
      const items = await Promise.all(
        skills.map(async (s) => ({
          ...toSkill(s),
          configuration: (await getSkillConfig(app.db, tenantId, s.id)) ?? configView(s.id, s.env_schema, null),
        })),
      );
      return { items };
    },
  );

  app.get(
    '/api/skills/all',
    {
      ...admin,
      schema: {
        ...common,
        operationId: 'listAllSkills',
        summary: 'Every synced skill of the tenant, unpublished too, with file hashes',
        response: { 200: z.object({ items: z.array(SkillDetail) }).meta({ id: 'SkillDetailList' }), ...errors },
      },
    },
    async (request) => ({ items: (await listSkills(app.db, request.tenant!.id, 'all')).map(toSkillDetail) }),
  );

  app.post(
    '/api/skills/sync',
    {
      ...admin,
      schema: {
        ...common,
        operationId: 'syncSkills',
        summary: 'Read the skills directory and record its skills for this tenant',
        description:
          "Records every file's SHA-256 and size. A skill whose files changed is taken only with a new version (refused otherwise: changed_without_new_version). A bad skill is listed under refused with its reason; the others still sync.",
        response: { 200: SyncResult, ...errors, 503: PlatformError },
      },
    },
    async (request) => {
      try {
        const outcome = await syncSkills(app.db, {
          tenantId: request.tenant!.id,
          userId: request.user!.userId,
          dir: app.config.skillsDir,
        });
        request.log.info(
          { synced: outcome.synced.length, refused: outcome.refused.map((r) => `${r.name}:${r.code}`) },
          'skills synced',
        );
        return { directory: app.config.skillsDir, ...outcome };
      } catch (error) {
        if (error instanceof SkillsDirectoryError)
          throw new PlatformHttpError(503, 'skills_directory_unavailable', `The ${error.message}.`);
        throw error;
      }
    },
  );

  const retired = async () => {
    throw new PlatformHttpError(
      410,
      LEGACY_RETIRED,
      'Skill registration is retired: put the skill in the skills directory and call POST /api/skills/sync. Earlier registrations are kept for audit and re-import.',
    );
  };
  app.post(
    '/api/skills/register',
    {
      ...admin,
      schema: {
        ...common,
        operationId: 'registerSkillRetired',
        summary: 'Retired: answers 410 legacy_skill_registration_retired',
        deprecated: true,
        response: { ...errors, 410: PlatformError },
      },
    },
    retired,
  );
  app.delete(
    '/api/skills/register/:skillId',
    {
      ...admin,
      schema: {
        ...common,
        operationId: 'deleteSkillRegistrationRetired',
        summary: 'Retired: answers 410; legacy registrations are kept for audit and explicit re-import',
        deprecated: true,
        params: z.object({ skillId: z.string().min(1).max(200) }),
        response: { ...errors, 410: PlatformError },
      },
    },
    retired,
  );

  for (const [action, published] of [
    ['publish', true],
    ['unpublish', false],
  ] as const) {
    app.post(
      `/api/skills/:skillId/${action}`,
      {
        ...admin,
        schema: {
          ...common,
          operationId: `${action}Skill`,
          summary: published
            ? "Publish to the catalog (the tenant's agents can use it once configured)"
            : 'Remove from the catalog',
          params: SkillParams,
          response: { 200: Skill, ...errors },
        },
      },
      async (request) => {
        const skill = await setPublished(app.db, request.tenant!.id, request.params.skillId, published);
        if (!skill) throw notFound();
        return toSkill(skill);
      },
    );
  }

  app.put(
    '/api/skills/:skillId/env-schema',
    {
      ...admin,
      schema: {
        ...common,
        operationId: 'setSkillEnvSchema',
        summary: 'Declare the configuration fields of a skill (name, type, required, secret, description, default)',
        description: 'Stored values of fields that are removed or change type or secrecy are dropped.',
        params: SkillParams,
        body: EnvSchemaBody,
        response: { 200: Skill, ...errors },
      },
    },
    async (request) => {
      const skill = await setEnvSchema(app.db, request.tenant!.id, request.params.skillId, request.body.fields);
      if (!skill) throw notFound();
      return toSkill(skill);
    },
  );

  app.post(
    '/api/skills/:skillId/configure',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'configureSkill',
        summary: 'Save configuration values, checked against the env schema; secret values are sealed and shown masked',
        params: SkillParams,
        body: ConfigureBody,
        response: { 200: SkillConfig, ...errors },
      },
    },
    async (request) => {
      try {
        const view = await configureSkill(app.db, keyring, {
          tenantId: request.tenant!.id,
          skillId: request.params.skillId,
          userId: request.user!.userId,
          values: request.body.values,
        });
        if (!view) throw notFound();
        return view;
      } catch (error) {
        if (error instanceof SkillConfigInvalidError) {
          throw new PlatformHttpError(400, 'invalid_skill_configuration', `Invalid request: ${error.message}`);
        }
        throw error;
      }
    },
  );

  app.delete(
    '/api/skills/:skillId/configure',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'resetSkillConfiguration',
        summary: 'Remove the configuration: back to the defaults',
        params: SkillParams,
        response: { 200: SkillConfig, ...errors },
      },
    },
    async (request) => {
      const view = await resetSkillConfig(app.db, request.tenant!.id, request.params.skillId);
      if (!view) throw notFound();
      return view;
    },
  );
};

export default skillRoutes;
