import { z } from 'zod';
import { Attachment } from '../../../core/chat/send.ts';

export const SendBody = z
  .object({
    sessionId: z.uuid(),
    message: z.string().trim().min(1).max(32_000),
    companyScope: z.string().min(1).max(256).optional().describe('Company the turn is about, if any'),
    attachments: z.array(Attachment).max(10).default([]),
  })
  .meta({ id: 'ChatSendRequest' });

export const SendAccepted = z
  .object({
    jobId: z.uuid().describe('Follow it at GET /api/chat/jobs/:jobId or over /api/ws'),
    messageId: z.uuid().describe('The stored user message'),
    sessionId: z.uuid(),
    status: z.literal('queued'),
  })
  .meta({ id: 'ChatSendAccepted' });

export const Session = z
  .object({
    id: z.uuid(),
    title: z.string(),
    agentId: z.uuid().nullable(),
    model: z.string().nullable(),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'ChatSession' });

export const Message = z
  .object({
    id: z.uuid(),
    sessionId: z.uuid(),
    role: z.enum(['user', 'assistant', 'system']),
    content: z.string(),
    attachments: z.array(z.unknown()),
    companyScope: z.string().nullable(),
    model: z.string().nullable().describe('Model that wrote an assistant message'),
    jobId: z.uuid().nullable().describe('The turn that wrote an assistant message'),
    createdAt: z.iso.datetime(),
  })
  .meta({ id: 'ChatMessage' });

export const Provisioned = z
  .object({
    tenantId: z.uuid(),
    agentId: z.uuid(),
    sessionId: z.uuid(),
    created: z.boolean().describe('False when everything already existed'),
  })
  .meta({ id: 'ChatInitResponse' });

// Printable ASCII without spaces, 8-200 characters.
export const IDEMPOTENCY_KEY = /^[\x21-\x7E]{8,200}$/;
