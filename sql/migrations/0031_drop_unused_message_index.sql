-- chat_messages_tenant_user_idx served the monthly quota when it counted a
-- tenant's user messages (0004, 0005). Since 0012 the quota and billing
-- status read tenant_message_counts, and no query reads the index any more,
-- while every user message still paid an index entry for it.
drop index if exists chat_messages_tenant_user_idx;
