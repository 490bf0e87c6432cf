// POST /api/contact/ (anyone, 5 per 15 min per IP) and the operator's
// GET /api/contacts/, PATCH and DELETE /api/contacts/:id.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  CONTACT_STATUSES,
  deleteContact,
  listContacts,
  setContactStatus,
  submitContact,
  type ContactRow,
} from '../../../core/contact/contact.ts';
import { nameSchema } from '../../../core/names.ts';
import { PageQuery } from '../../../core/paging.ts';
import { LIMITS } from '../../../core/rate-limit.ts';
import { pageOr400, PlatformError, PlatformHttpError } from '../../errors.ts';

const Contact = z
  .object({
    id: z.uuid(),
    name: z.string(),
    email: z.string(),
    subject: z.string().nullable(),
    message: z.string(),
    status: z.enum(CONTACT_STATUSES),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'ContactSubmission' });
const toContact = (r: ContactRow) => ({
  id: r.id,
  name: r.name,
  email: r.email,
  subject: r.subject,
  message: r.message,
  status: r.status,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});
const oneLine = (max: number) =>
  z
    .string()
    .trim()
    .min(1)
    .max(max)
    .regex(/^[^\r\n]*$/, 'must be a single line');
const Id = z.object({ id: z.uuid() });
const operatorErrors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };

const contactRoutes: FastifyPluginAsyncZod = async (app) => {
  const security = [{ PlatformJWT: [] }];

  app.post(
    '/api/contact/',
    {
      onRequest: app.rateLimit(LIMITS.contact),
      schema: {
        operationId: 'submitContact',
        security: [],
        tags: ['contact'],
        summary: 'Submit a contact message',
        body: z.object({
          name: nameSchema(),
          email: z.email().max(320),
          subject: oneLine(200).optional(),
          message: z.string().trim().min(1).max(5000),
        }),
        response: {
          201: z.object({ id: z.uuid(), status: z.literal('received') }),
          400: PlatformError,
          429: PlatformError,
        },
      },
    },
    async (request, reply) => {
      const row = await submitContact(app.db, { ...request.body, ip: request.ip });
      return reply.code(201).send({ id: row.id, status: 'received' as const });
    },
  );

  app.get(
    '/api/contacts/',
    {
      onRequest: app.requireOperator,
      schema: {
        operationId: 'listContacts',
        tags: ['contact'],
        summary: 'List submissions, newest first (operator)',
        security,
        querystring: PageQuery.extend({ status: z.enum(CONTACT_STATUSES).optional() }),
        response: {
          200: z.object({ items: z.array(Contact), nextCursor: z.string().nullable() }).meta({ id: 'ContactPage' }),
          ...operatorErrors,
        },
      },
    },
    async (request) => {
      const page = await pageOr400(() => listContacts(app.db, request.query));
      return { items: page.items.map(toContact), nextCursor: page.nextCursor };
    },
  );

  app.patch(
    '/api/contacts/:id',
    {
      onRequest: app.requireOperator,
      schema: {
        operationId: 'updateContact',
        tags: ['contact'],
        summary: 'Update the status of a submission (operator)',
        security,
        params: Id,
        body: z.object({ status: z.enum(CONTACT_STATUSES) }),
        response: { 200: Contact, ...operatorErrors },
      },
    },
    async (request) => {
      const row = await setContactStatus(app.db, request.params.id, request.body.status);
      if (!row) throw new PlatformHttpError(404, 'not_found', 'No such submission.');
      return toContact(row);
    },
  );

  app.delete(
    '/api/contacts/:id',
    {
      onRequest: app.requireOperator,
      schema: {
        operationId: 'deleteContact',
        tags: ['contact'],
        summary: 'Delete a submission (operator)',
        security,
        params: Id,
        response: { 204: z.undefined(), ...operatorErrors },
      },
    },
    async (request, reply) => {
      if (!(await deleteContact(app.db, request.params.id)))
        throw new PlatformHttpError(404, 'not_found', 'No such submission.');
      return reply.code(204).send();
    },
  );
};

export default contactRoutes;
