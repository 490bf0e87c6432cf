import { z } from 'zod';
import { MEMORY_BOUNDS } from '../../../core/memory/settings.ts';
import { MAX_FILENAME_LENGTH } from '../../../core/memory/files.ts';

const bounded = (b: { min: number; max: number }) => z.int().min(b.min).max(b.max);

export const MemoryConfig = z
  .object({
    tenantId: z.uuid().describe('The workspace this memory belongs to'),
    enabled: z.boolean().describe('Whether chat turns and company runs see the memory'),
    retentionDays: z.int().describe('Files not written for this many days are deleted by the daily retention job'),
    maxFiles: z.int(),
    maxFileBytes: z.int(),
    maxTotalBytes: z.int(),
    usage: z.object({ files: z.int(), bytes: z.int() }),
    updatedAt: z.iso.datetime().nullable().describe('null: the defaults were never changed'),
  })
  .meta({ id: 'MemoryConfig' });

export const MemoryConfigBody = z
  .object({
    enabled: z.boolean().optional(),
    retentionDays: bounded(MEMORY_BOUNDS.retentionDays).optional(),
    maxFiles: bounded(MEMORY_BOUNDS.maxFiles).optional(),
    maxFileBytes: bounded(MEMORY_BOUNDS.maxFileBytes).optional(),
    maxTotalBytes: bounded(MEMORY_BOUNDS.maxTotalBytes).optional(),
  })
  .strict();

export const MemoryFile = z
  .object({ name: z.string(), bytes: z.int(), createdAt: z.iso.datetime(), updatedAt: z.iso.datetime() })
  .meta({ id: 'MemoryFile' });

export const MemoryFileWithContent = MemoryFile.extend({ content: z.string() }).meta({ id: 'MemoryFileWithContent' });

export const FilenameParams = z.object({
  filename: z
    .string()
    .min(1)
    .max(1000)
    .describe(
      `A file name: letters, digits, '.', '_', '-'; no path separators or '..'; at most ${MAX_FILENAME_LENGTH} characters`,
    ),
});

export const MemoryContent = z
  .object({
    tenantId: z.uuid(),
    enabled: z.boolean(),
    text: z.string().describe('Exactly the memory text the next turn gives the model (empty when disabled or empty)'),
    files: z.array(z.string()).describe('Files included, in order'),
    truncated: z.boolean().describe('True when the files exceed the prompt budget and were cut'),
    budget: z.int().describe('Characters of memory one turn may carry'),
  })
  .meta({ id: 'MemoryContent' });

export const MemoryWriteBody = z
  .object({
    filename: z.string().min(1).max(1000),
    content: z.string().max(MEMORY_BOUNDS.maxFileBytes.max),
    mode: z
      .enum(['append', 'replace'])
      .default('append')
      .describe('append adds to the end of the file (creating it); replace overwrites it'),
  })
  .strict();
