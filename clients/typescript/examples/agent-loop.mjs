// The README's agent loop with the TypeScript client: retrieve before each turn, play, submit the
// episode and a lesson, report how the retrievals went. Run after `npm run build`:
//   MEMWEB_URL=http://127.0.0.1:8000 MEMWEB_API_KEY=mw_... node examples/agent-loop.mjs
import { MemwebClient, MemwebError } from "../dist/index.js";

const llm = async (prompt) => "Sorry about that: I have started a return for order W1001."; // your agent's model

const memweb = new MemwebClient(process.env.MEMWEB_URL, process.env.MEMWEB_API_KEY);
try {
  await memweb.bank("support");
} catch (error) {
  if (!(error instanceof MemwebError && error.kind === "not_found")) throw error;
  await memweb.bankCreate({ name: "support", description: "Customer-service lessons" }); // a fresh instance
}

const customerTurns = ["My dishwasher arrived with a cracked door, I want to return it.", "It is order W1001."];
const messages = [];
const retrievalIds = [];
for (const turn of customerTurns) {
  const found = await memweb.retrieve("support", { query: turn, context: { domain: "appliances" } });
  retrievalIds.push(found.retrieval_id);
  const reply = await llm(`${found.prompt_block}\n\nCustomer: ${turn}\nAgent:`);
  messages.push({ role: "user", content: turn }, { role: "assistant", content: reply });
}
const success = true; // however your shop judges the conversation
const queued = await memweb.episodeWrite("support", {
  trajectory: { task_id: "ticket-2", domain: "appliances", messages, reward: 1, success },
  episode_ref: "ticket-2",
});
await memweb.remember("support", { text: "Ask for the order number before promising a return.", domain: "appliances" });
for (const retrievalId of retrievalIds) {
  await memweb.retrievalOutcome(retrievalId, { success, reward: 1, episode_ref: "ticket-2" });
}
const ingest = await memweb.waitForEpisode(queued.ingest_id);
console.log(ingest.status, ingest.orb?.status);
