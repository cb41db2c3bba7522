/**
 * The codes `lib/mcp/` throws (see mod.ts).
 *
 * @module
 */

/** The codes `lib/mcp/` throws. */
export type McpErrorCode =
  | "lifecycle_mismatch"
  | "mcp_ambiguous_message"
  | "mcp_bad_arguments"
  | "mcp_channel_refused"
  | "mcp_inbox_unreadable"
  | "mcp_unknown_message"
  | "recipient_unknown"
  | "resource_unknown"
  | "role_unknown"
  | "usage";
