// Request and response schemas of the insight-board routes of the Agent API
// (named as the published description names them).
import { z } from 'zod';

export const BoardParams = z.object({ boardId: z.string().min(1).max(256).describe('Board id (length 1-256)') });

export const ListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(50).describe('Page size, 1-100'),
  cursor: z.coerce
    .number()
    .int()
    .min(0)
    .max(1_000_000)
    .default(0)
    .describe('Position key: boards after this position (0-1000000)'),
  scopeType: z.enum(['company', 'agent']).optional(),
  scopeId: z.string().min(1).max(128).optional(),
});

const Content = z
  .union([z.record(z.string(), z.unknown()), z.array(z.unknown())])
  .describe('Board content: a JSON object or array');
const BoardSummary = z.object({
  id: z.uuid(),
  title: z.string(),
  scope_type: z.enum(['company', 'agent']),
  scope_id: z.string(),
  position: z.int(),
  latest_version: z.int().describe('0 while nothing is saved'),
  created_at: z.iso.datetime({ offset: true }),
  updated_at: z.iso.datetime({ offset: true }),
});

export const BoardList = z
  .object({
    items: z.array(BoardSummary),
    next_cursor: z.int().nullable().describe('Pass as cursor for the next page; null on the last page'),
  })
  .meta({ id: 'listInsightBoards.response.v1' });

export const Board = BoardSummary.extend({ content: Content.nullable() }).meta({ id: 'getInsightBoard.response.v1' });

const Publication = z.object({
  board_id: z.uuid(),
  state: z.enum(['unpublished', 'published']),
  version: z.int().nullable(),
  visibility: z.enum(['private', 'public']).nullable(),
  published_at: z.iso.datetime({ offset: true }).nullable(),
  unpublished_at: z.iso.datetime({ offset: true }).nullable(),
  active_link: z
    .object({ created_at: z.iso.datetime({ offset: true }) })
    .nullable()
    .describe('Never carries the secret'),
});
export const PublicationResponse = Publication.meta({ id: 'getInsightBoardPublication.response.v1' });

const NewLink = z.object({
  url: z.url().describe('The hosted board; the secret is part of it, shown only in this response'),
  secret: z.string(),
  created_at: z.iso.datetime({ offset: true }),
});

export const PublishBody = z
  .object({
    version: z.int().min(1).max(1_000_000).optional().describe('Version to publish; the latest when omitted'),
    visibility: z.enum(['private', 'public']),
  })
  .strict()
  .meta({ id: 'publishInsightBoard.request.v1' });

export const PublishResponse = z
  .discriminatedUnion('state', [
    z.object({
      state: z.literal('published'),
      publication: Publication,
      link: NewLink.nullable().describe('Only when a public link was created by this call; returned once'),
    }),
    z.object({
      state: z.literal('approval_required'),
      approval: z.object({
        id: z.uuid(),
        state: z.literal('pending'),
        approve_url: z
          .url()
          .describe(
            'A page for a tenant Admin (a person), who signs in there and approves or denies; carries no credential',
          ),
      }),
      next_action: z.literal('await_approval'),
    }),
  ])
  .meta({ id: 'publishInsightBoard.response.v1' });

export const UnpublishBody = z.object({}).strict().meta({ id: 'unpublishInsightBoard.request.v1' });
export const UnpublishResponse = z
  .object({ publication: Publication, revoked_links: z.int() })
  .meta({ id: 'unpublishInsightBoard.response.v1' });

export const RotateBody = z.object({}).strict().meta({ id: 'rotateInsightBoardLink.request.v1' });
export const RotateResponse = z
  .object({ board_id: z.uuid(), link: NewLink, revoked_links: z.int() })
  .meta({ id: 'rotateInsightBoardLink.response.v1' });

// Extensions: creating and saving boards.
export const CreateBody = z
  .object({
    title: z.string().trim().min(1).max(200),
    scope_type: z.enum(['company', 'agent']),
    scope_id: z.string().min(1).max(128),
    content: Content.optional(),
  })
  .strict()
  .meta({ id: 'createInsightBoard.request.v1' });
export const SaveBody = z.object({ content: Content }).strict().meta({ id: 'saveInsightBoardVersion.request.v1' });
