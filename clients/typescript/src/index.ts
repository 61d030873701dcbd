export { createMemlaneClient, ok, type ClientOptions, type MemlaneClient } from "./client.js";
export * from "./errors.js";
export type { components, operations, paths } from "./schema.js";

import type { components } from "./schema.js";

/** The API's models by name: `Schemas["MemoryPublic"]`, `Schemas["ContextOut"]`, … */
export type Schemas = components["schemas"];
