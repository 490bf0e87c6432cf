// Every Agent API operation, in the order of the published table: the HTTP
// routes and the MCP tools are both made from this list.
import { boardOperations } from './boards.ts';
import { companyOperations } from './companies.ts';
import { identityOperations } from './identity.ts';
import { jobOperations } from './jobs.ts';
import { managedAgentOperations } from './managed-agents.ts';

export const agentOperations = [
  ...identityOperations,
  ...companyOperations,
  ...boardOperations,
  ...managedAgentOperations,
  ...jobOperations,
];
