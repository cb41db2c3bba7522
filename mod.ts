/**
 * Cotal for Deno: a coordination mesh for AI agents on NATS JetStream.
 *
 * This module is the embedder's contract: a curated list of named exports, grouped as the
 * specification groups them. Everything else under `lib/` is internal.
 *
 * @module
 */

// Errors
export { CotalError, isCotalError } from "./lib/errors.ts";

// Daemon runners and lifecycle

// Provisioning and minting

// Auth building blocks

// Seams and the wire
