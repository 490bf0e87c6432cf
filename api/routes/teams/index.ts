// A workspace's people: members (list, change a role, remove, leave, hand
// the workspace over),
// invitations (create, list, revoke; re-send in resend.ts) and the audit of both. Tenant-scoped
// (x-tenant-id); the rules and the record live in core/teams.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { Keyring } from '../../../core/crypto/keyring.ts';
import { pageOf, PageQuery } from '../../../core/paging.ts';
import { listAudit } from '../../../core/teams/audit.ts';
import { createInvitation, listOpenInvitations, revokeInvitation } from '../../../core/teams/invitations.ts';
import { changeRole, listMembers, removeMember, transferOwnership } from '../../../core/teams/members.ts';
import { PlatformError, platformCursor } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';
import { teamRefusal } from './refusals.ts';
import invitationResendRoutes from './resend.ts';
import {
  AuditPage,
  CreatedInvitation,
  InviteBody,
  MemberPage,
  Member,
  InvitationPage,
  OwnerBody,
  RoleBody,
  toAuditEntry,
  toInvitation,
  toMember,
} from './schemas.ts';

const teamRoutes: FastifyPluginAsyncZod = async (app) => {
  const security = [{ PlatformJWT: [] }];
  const admin = { onRequest: app.requireUser, preValidation: app.requireTenant('admin') };
  const viewer = { onRequest: app.requireUser, preValidation: app.requireTenant('viewer') };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };
  const keyring = Keyring.fromConfig(app.config);
  const actorOf = (request: { user: { userId: string } | null; id: string }) => ({
    userId: request.user!.userId,
    requestId: request.id,
  });

  app.get(
    '/api/tenants/members',
    {
      ...viewer,
      schema: {
        operationId: 'listTenantMembers',
        tags: ['teams'],
        summary: "The workspace's members with their roles, in the order they joined",
        security,
        headers: TenantHeaders,
        querystring: PageQuery,
        response: { 200: MemberPage, ...errors },
      },
    },
    async (request) => {
      const rows = await listMembers(app.db, request.tenant!.id, {
        limit: request.query.limit,
        after: platformCursor(request.query.cursor),
      });
      const { items, nextCursor } = pageOf(rows, request.query.limit);
      return { items: items.map((row) => toMember(row, request.user!.userId)), nextCursor };
    },
  );

  app.patch(
    '/api/tenants/members/:userId',
    {
      ...admin,
      schema: {
        operationId: 'changeTenantMemberRole',
        tags: ['teams'],
        summary: "Change a member's role (Admin)",
        description:
          'The last Admin cannot be demoted, and the owner stays an Admin (409 `last_admin`, `owner_protected`). Audited.',
        security,
        headers: TenantHeaders,
        params: z.object({ userId: z.uuid() }),
        body: RoleBody,
        response: { 200: Member, ...errors, 409: PlatformError },
      },
    },
    async (request) => {
      try {
        const row = await changeRole(
          app.db,
          request.tenant!.id,
          actorOf(request),
          request.params.userId,
          request.body.role,
        );
        app.forgetMembership(request.tenant!.id, request.params.userId);
        request.log.info(
          { tenantId: request.tenant!.id, memberId: request.params.userId, role: row.role },
          'member role changed',
        );
        return toMember(row, request.user!.userId);
      } catch (error) {
        throw teamRefusal(error);
      }
    },
  );

  app.delete(
    '/api/tenants/members/:userId',
    {
      ...admin,
      schema: {
        operationId: 'removeTenantMember',
        tags: ['teams'],
        summary: 'Remove a member (Admin); their tokens stop working here at once',
        description:
          'Their account and their other workspaces are untouched. The last Admin and the owner cannot be removed (409). Audited.',
        security,
        headers: TenantHeaders,
        params: z.object({ userId: z.uuid() }),
        response: { 204: z.null().describe('Removed'), ...errors, 409: PlatformError },
      },
    },
    async (request, reply) => {
      try {
        await removeMember(app.db, request.tenant!.id, actorOf(request), request.params.userId);
      } catch (error) {
        throw teamRefusal(error);
      }
      app.forgetMembership(request.tenant!.id, request.params.userId);
      request.log.info({ tenantId: request.tenant!.id, memberId: request.params.userId }, 'member removed');
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/api/tenants/owner',
    {
      ...admin,
      schema: {
        operationId: 'transferTenantOwnership',
        tags: ['teams'],
        summary: 'Hand the workspace over to another Admin (its owner)',
        description:
          "The workspace then counts for the new owner's account (its fair share and plan limits); the former owner stays an Admin and may leave. " +
          'Only the owner may (403 `owner_required`), or any Admin of a workspace nobody owns; the new owner must be an Admin (409 `owner_must_be_admin`). ' +
          'Naming the current owner changes nothing. Audited.',
        security,
        headers: TenantHeaders,
        body: OwnerBody,
        response: { 200: Member, ...errors, 409: PlatformError },
      },
    },
    async (request) => {
      try {
        const row = await transferOwnership(app.db, request.tenant!.id, actorOf(request), request.body.userId);
        request.log.info({ tenantId: request.tenant!.id, ownerId: row.id }, 'workspace handed over');
        return toMember(row, request.user!.userId);
      } catch (error) {
        throw teamRefusal(error);
      }
    },
  );

  app.post(
    '/api/tenants/leave',
    {
      ...viewer,
      schema: {
        operationId: 'leaveTenant',
        tags: ['teams'],
        summary: 'Leave the workspace',
        description: 'The last Admin and the owner cannot leave (409 `last_admin`, `owner_protected`). Audited.',
        security,
        headers: TenantHeaders,
        response: { 204: z.null().describe('Left'), ...errors, 409: PlatformError },
      },
    },
    async (request, reply) => {
      try {
        await removeMember(app.db, request.tenant!.id, actorOf(request), request.user!.userId);
      } catch (error) {
        throw teamRefusal(error);
      }
      app.forgetMembership(request.tenant!.id, request.user!.userId);
      request.log.info({ tenantId: request.tenant!.id }, 'member left');
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/api/tenants/invitations',
    {
      ...admin,
      schema: {
        operationId: 'inviteTenantMember',
        tags: ['teams'],
        summary:
          'Invite an e-mail address with a role (Admin); the one-time link goes to the mailbox (SMTP configured) or is in the answer',
        description:
          `The link works once, until it expires (INVITATION_TTL_HOURS, 7 days by default) or is revoked; a new invitation for the same address replaces the open one. ` +
          "With SMTP configured the link goes only to the invitee's mailbox (`emailed: true`, `link: null`), so accepting it proves the mailbox; resend it with POST /api/tenants/invitations/{invitationId}/resend. " +
          'Without SMTP the answer carries the link for the Admin to pass on (`emailed: false`); an account made from it is unverified (never linked to an external login by its e-mail). ' +
          'An address that is already a member is 409 `already_member`; ' +
          'the workspace may send INVITATIONS_PER_DAY invitations a day (429 `invitation_limit`) and have INVITATIONS_PENDING_MAX open (409 `too_many_pending_invitations`). Audited.',
        security,
        headers: TenantHeaders,
        body: InviteBody,
        response: { 201: CreatedInvitation, ...errors, 409: PlatformError, 429: PlatformError },
      },
    },
    async (request, reply) => {
      let created;
      try {
        created = await createInvitation(app.db, {
          tenantId: request.tenant!.id,
          actor: actorOf(request),
          email: request.body.email,
          role: request.body.role,
          settings: app.config.teams,
          baseUrl: app.config.baseUrl,
          keyring,
        });
      } catch (error) {
        throw teamRefusal(error);
      }
      const { invitation, link, emailed } = created;
      request.log.info(
        { tenantId: request.tenant!.id, invitationId: invitation.id, role: invitation.role, emailed },
        'invitation created',
      );
      const message = emailed
        ? `The link was sent by e-mail to ${invitation.email} only (it is not shown here, so that only the owner of that mailbox can accept). Resend it with POST /api/tenants/invitations/${invitation.id}/resend, or revoke it with DELETE /api/tenants/invitations/${invitation.id}.`
        : `The link was not e-mailed (no SMTP server is configured): pass it on to ${invitation.email} yourself. An account made from it counts as unverified until its owner proves the mailbox.`;
      return reply.code(201).send({ ...toInvitation(invitation), link, emailed, message });
    },
  );

  app.get(
    '/api/tenants/invitations',
    {
      ...admin,
      schema: {
        operationId: 'listTenantInvitations',
        tags: ['teams'],
        summary: 'Open invitations (not accepted or revoked), newest first (Admin)',
        description:
          'Expired ones are listed (`expired: true`) until revoked or replaced. Links are never shown again.',
        security,
        headers: TenantHeaders,
        querystring: PageQuery,
        response: { 200: InvitationPage, ...errors },
      },
    },
    async (request) => {
      const rows = await listOpenInvitations(app.db, request.tenant!.id, {
        limit: request.query.limit,
        after: platformCursor(request.query.cursor),
      });
      const { items, nextCursor } = pageOf(rows, request.query.limit);
      return { items: items.map(toInvitation), nextCursor };
    },
  );

  app.delete(
    '/api/tenants/invitations/:invitationId',
    {
      ...admin,
      schema: {
        operationId: 'revokeTenantInvitation',
        tags: ['teams'],
        summary: 'Revoke an invitation (Admin); its link stops working at once',
        description:
          'Repeatable; an accepted invitation is 409 `invitation_used` (remove the member instead). Audited.',
        security,
        headers: TenantHeaders,
        params: z.object({ invitationId: z.uuid() }),
        response: { 204: z.null().describe('Revoked'), ...errors, 409: PlatformError },
      },
    },
    async (request, reply) => {
      try {
        await revokeInvitation(app.db, request.tenant!.id, actorOf(request), request.params.invitationId);
      } catch (error) {
        throw teamRefusal(error);
      }
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/api/tenants/audit',
    {
      ...admin,
      schema: {
        operationId: 'listTenantMemberAudit',
        tags: ['teams'],
        summary: "The workspace's membership changes, newest first (Admin)",
        description:
          'Invitations created, revoked and accepted, role changes, removals, departures and hand-overs of the workspace: who, when, whom, from which role to which.',
        security,
        headers: TenantHeaders,
        querystring: PageQuery,
        response: { 200: AuditPage, ...errors },
      },
    },
    async (request) => {
      const rows = await listAudit(app.db, request.tenant!.id, {
        limit: request.query.limit,
        after: platformCursor(request.query.cursor),
      });
      const { items, nextCursor } = pageOf(rows, request.query.limit);
      return { items: items.map(toAuditEntry), nextCursor };
    },
  );

  await app.register(invitationResendRoutes);
};

export default teamRoutes;
