// Memory ("Auth"): the workspace's memory settings, files and the text the
// agent sees. Reads need Viewer, writes Admin; without x-tenant-id the
// caller's own workspace (api/routes/memory/workspace.ts).
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { MEMORY_PROMPT_BUDGET, memoryContext } from '../../../core/memory/context.ts';
import {
  deleteMemoryFile,
  isSafeFilename,
  listMemoryFiles,
  MemoryLimitError,
  readMemoryFile,
  writeMemoryFile,
  type MemoryFileRow,
} from '../../../core/memory/files.ts';
import {
  getMemorySettings,
  InvalidMemorySettingsError,
  saveMemorySettings,
  type MemorySettings,
} from '../../../core/memory/settings.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import {
  FilenameParams,
  MemoryConfig,
  MemoryConfigBody,
  MemoryContent,
  MemoryFile,
  MemoryFileWithContent,
  MemoryWriteBody,
} from './schemas.ts';
import { OptionalTenantHeaders } from '../../plugins/tenant.ts';

const toFile = (f: MemoryFileRow) => ({
  name: f.name,
  bytes: f.bytes,
  createdAt: f.created_at,
  updatedAt: f.updated_at,
});

function checkedName(name: string, where: string): string {
  if (!isSafeFilename(name)) {
    throw new PlatformHttpError(
      400,
      'invalid_filename',
      `Invalid request: ${where}: a file name of letters, digits, '.', '_' and '-' (at most 100), without path separators or '..'.`,
    );
  }
  return name;
}

const memoryRoutes: FastifyPluginAsyncZod = async (app) => {
  const viewer = { onRequest: app.requireUser, preValidation: app.requireWorkspace('viewer') };
  const admin = { onRequest: app.requireUser, preValidation: app.requireWorkspace('admin') };
  const member = { onRequest: app.requireUser, preValidation: app.requireWorkspace('member') };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };
  const common = { tags: ['memory'], security: [{ PlatformJWT: [] }], headers: OptionalTenantHeaders };

  const configOf = async (tenantId: string, settings: MemorySettings) => {
    const files = await listMemoryFiles(app.db, tenantId);
    const { updatedAt, ...rest } = settings;
    return {
      tenantId,
      ...rest,
      usage: { files: files.length, bytes: files.reduce((n, f) => n + f.bytes, 0) },
      updatedAt,
    };
  };

  app.get(
    '/api/memory/config',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'getMemoryConfig',
        summary: 'Memory settings (enabled, retention, limits) and current usage',
        response: { 200: MemoryConfig, ...errors },
      },
    },
    async (request) => configOf(request.tenant!.id, await getMemorySettings(app.db, request.tenant!.id)),
  );

  app.post(
    '/api/memory/config',
    {
      ...admin,
      schema: {
        ...common,
        operationId: 'setMemoryConfig',
        summary: 'Change memory settings; fields left out keep their value',
        body: MemoryConfigBody,
        response: { 200: MemoryConfig, ...errors },
      },
    },
    async (request) => {
      try {
        return await configOf(
          request.tenant!.id,
          await saveMemorySettings(app.db, request.tenant!.id, request.user!.userId, request.body),
        );
      } catch (error) {
        if (error instanceof InvalidMemorySettingsError)
          throw new PlatformHttpError(400, 'invalid_memory_limits', `Invalid request: body: ${error.message}`);
        throw error;
      }
    },
  );

  app.get(
    '/api/memory/files',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'listMemoryFiles',
        summary: 'Memory files of the workspace, by name',
        response: {
          200: z
            .object({ tenantId: z.uuid(), files: z.array(MemoryFile), totalBytes: z.int() })
            .meta({ id: 'MemoryFileList' }),
          ...errors,
        },
      },
    },
    async (request) => {
      const files = await listMemoryFiles(app.db, request.tenant!.id);
      return {
        tenantId: request.tenant!.id,
        files: files.map(toFile),
        totalBytes: files.reduce((n, f) => n + f.bytes, 0),
      };
    },
  );

  app.get(
    '/api/memory/files/:filename',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'getMemoryFile',
        summary: 'One memory file with its content',
        params: FilenameParams,
        response: { 200: MemoryFileWithContent, ...errors },
      },
    },
    async (request) => {
      const file = await readMemoryFile(
        app.db,
        request.tenant!.id,
        checkedName(request.params.filename, 'params.filename'),
      );
      if (!file) throw new PlatformHttpError(404, 'not_found', 'No memory file of that name.');
      return { ...toFile(file), content: file.content };
    },
  );

  app.delete(
    '/api/memory/files/:filename',
    {
      ...admin,
      schema: {
        ...common,
        operationId: 'deleteMemoryFile',
        summary: 'Delete a memory file',
        params: FilenameParams,
        response: { 204: z.undefined().describe('Deleted'), ...errors },
      },
    },
    async (request, reply) => {
      const gone = await deleteMemoryFile(
        app.db,
        request.tenant!.id,
        checkedName(request.params.filename, 'params.filename'),
      );
      if (!gone) throw new PlatformHttpError(404, 'not_found', 'No memory file of that name.');
      return reply.code(204).send();
    },
  );

  app.get(
    '/api/memory/content',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'getMemoryContent',
        summary: 'The memory text the agent sees in its next turn',
        response: { 200: MemoryContent, ...errors },
      },
    },
    async (request) => {
      const memory = await memoryContext(app.db, request.tenant!.id);
      return { tenantId: request.tenant!.id, ...memory, budget: MEMORY_PROMPT_BUDGET };
    },
  );

  app.post(
    '/api/memory/content',
    {
      ...member,
      schema: {
        ...common,
        operationId: 'writeMemoryContent',
        summary: 'Append to or replace a named memory file',
        description:
          'Refused past a limit with nothing written: 413 memory_file_too_large, 413 memory_total_too_large, 400 memory_too_many_files; 400 invalid_filename for an unsafe name.',
        body: MemoryWriteBody,
        response: { 200: MemoryFileWithContent, ...errors, 413: PlatformError },
      },
    },
    async (request) => {
      const { filename, content, mode } = request.body;
      try {
        const file = await writeMemoryFile(app.db, {
          tenantId: request.tenant!.id,
          userId: request.user!.userId,
          name: checkedName(filename, 'body.filename'),
          content,
          mode,
        });
        return { ...toFile(file), content: file.content };
      } catch (error) {
        if (error instanceof MemoryLimitError) throw new PlatformHttpError(error.status, error.code, error.message);
        throw error;
      }
    },
  );
};

export default memoryRoutes;
