/* narrative review page: the other views (storylines, conversations, open threads, archive, chain, search,
 * influence). The review step is in review.js; shared pieces in memory.js. */
"use strict";

(() => {
  const { el, $, fill, get, post, patch, say, failed, when, route } = N;
  const { memoryItem } = M;

  /* ================= storylines ================= */

  const story = { id: null, offset: 0, items: [] };

  async function storyView(args, query) {
    const storylines = await M.loadStorylines();
    const current = args[0] ? Number(args[0]) : (storylines[0] || {}).id;
    fill("storyline-list", storylines.map((s) => el("li", {},
      el("a", { href: `#/story/${s.id}`, "aria-current": s.id === current ? "page" : null }, s.name),
      el("span", { class: "muted" }, s.kind === "your_story" ? " · permanent" : s.status === "archived" ? " · archived" : ""))));
    if (current === undefined) return;
    const s = await get(`/storylines/${current}`);
    $("storyline").hidden = false;
    $("rename-form").hidden = true;
    $("storyline-rename").hidden = s.kind === "your_story";
    fill("storyline-name", s.name);
    fill("storyline-about", [s.description, s.keywords && s.keywords.length ? "keywords: " + s.keywords.join(", ") : ""]
      .filter(Boolean).join(" · "));
    fill("storyline-summary", M.summaryNodes(s.summary));
    Object.assign(story, { id: current, offset: 0, items: [] });
    await loadStoryPage();
    const wanted = query.get("memory");
    const target = wanted && document.getElementById(`story-memory-${wanted}`);
    if (target) target.classList.add("highlight");
    return s.name;
  }

  async function loadStoryPage() {
    const page = await get(`/memories?storyline_id=${story.id}&limit=100&offset=${story.offset}`);
    // oldest first; a memory an earlier one already shows (an overlapping exchange, a decision note) is folded
    story.items = page.items.filter((m) => m.folded_into == null).reverse().concat(story.items);
    story.offset = page.next_offset ?? story.offset + page.items.length;
    $("storyline-earlier").hidden = page.next_offset === null;
    fill("storyline-memories", story.items.length ? story.items.map((m) => {
      const item = memoryItem(m, { editable: true });
      item.id = `story-memory-${m.id}`;
      return item;
    }) : [el("li", { class: "muted" }, "No memories here yet.")]);
  }

  function wireRename() {
    $("storyline-rename").addEventListener("click", () => {
      $("rename-form").hidden = false;
      $("rename-input").value = $("storyline-name").textContent;
      $("rename-input").select();
      $("rename-input").focus();
    });
    $("rename-cancel").addEventListener("click", () => { $("rename-form").hidden = true; $("storyline-rename").focus(); });
    $("rename-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      const name = $("rename-input").value.trim();
      if (!name) { say("A storyline needs a name.", "error"); $("rename-input").focus(); return; }
      try {
        const renamed = await patch(`/storylines/${story.id}`, { name });
        await N.dispatch();
        say(`Renamed to ${renamed.name}.`, "ok");
        $("storyline-name").focus();
      } catch (error) { failed(error); }
    });
  }

  /* ================= conversations ================= */

  const STATUS = { active: "active", ready_to_close: "waiting for review", compressing: "being stored",
    archived: "archived" };
  let conversationsShown = 50;

  async function conversationsView(_args, query) {
    const status = query.get("status") || "";
    $("conversations-status").value = status;
    const page = await get(`/conversations?limit=${conversationsShown}${status ? "&status=" + status : ""}`);
    fill("conversation-list", page.items.length ? page.items.map(conversationRow)
      : [el("li", { class: "muted" }, status ? "No conversations with that status." : "No conversations yet.")]);
    $("conversations-more").hidden = page.next_offset === null;
  }

  function conversationRow(c) {
    const title = c.title || `Conversation #${c.id}`;
    const href = c.status === "ready_to_close" ? `#/review/${c.id}` : `#/archive/${c.id}`;
    return el("li", {}, el("a", { href }, title),
      el("span", { class: "muted" }, ` · ${STATUS[c.status] || c.status}${c.is_paused ? " (paused)" : ""} · ` +
        `${c.message_count} messages · ${when(c.last_message_at || c.started_at)}`));
  }

  function wireConversations() {
    $("conversations-status").addEventListener("change", () => {
      const status = $("conversations-status").value;
      location.hash = status ? `#/conversations?status=${status}` : "#/conversations";
    });
    $("conversations-more").addEventListener("click", () => { conversationsShown += 50; N.dispatch(); });
  }

  /* ================= open threads ================= */

  async function threadsView() {
    await M.loadStorylines();
    const page = await get("/entities/open?limit=200");
    fill("thread-list", page.items.length ? page.items.map(threadRow)
      : [el("li", { class: "muted" }, "No open threads: nothing is waiting.")]);
  }

  function threadRow(t) {
    const type = t.entity_type.replace(/_/g, " ");
    const button = el("button", { type: "button", "aria-label": `Resolve ${type}: ${t.name}` }, "Resolve");
    const row = el("li", { class: "thread" }, el("span", { class: "badge" }, type), " ", t.name,
      el("span", { class: "muted" }, ` · ${M.storylineName(t.storyline_id)} · since ${when(t.created_at)}`),
      t.memory_id ? [" · ", el("a", { href: `#/influence/memory/${t.memory_id}` }, "its memory")] : null, " ", button);
    button.addEventListener("click", async () => {
      try {
        await post(`/entities/${t.id}/resolve`);
        const next = row.nextElementSibling || row.previousElementSibling;
        row.remove();
        say(`Resolved: ${t.name}.`, "ok");
        const focus = next && next.querySelector("button");
        if (focus) focus.focus(); else $("threads-title").focus();
        if (!$("thread-list").children.length) fill("thread-list", el("li", { class: "muted" }, "No open threads: nothing is waiting."));
      } catch (error) { failed(error); }
    });
    return row;
  }

  /* ================= archive ================= */

  async function archiveView(args) {
    const data = await get(`/conversations/${Number(args[0])}/archive`);
    const c = data.conversation || {};
    fill("archive-title", c.title || `Conversation #${c.id}`);
    fill("archive-about", `${c.status} · started ${when(c.started_at)}` +
      (c.archived_at ? ` · archived ${when(c.archived_at)}` : "") + ` · ${c.message_count} messages`);
    const memories = data.memories || [];
    fill("archive-memories", memories.length ? memories.map((m) => memoryItem(m, { editable: true }))
      : [el("li", { class: "muted" }, "No memories were made from it.")]);
    const derived = data.derived || [];
    $("archive-derived-box").hidden = !derived.length;
    fill("archive-derived-title", `${derived.length} facts, decisions and notes taken along the way`);
    fill("archive-derived", derived.map((m) => memoryItem(m, { editable: true })));
    fill("archive-messages", (data.messages || []).map(M.transcriptItem));
  }

  /* ================= the narrative chain ================= */

  function linkItem(n) {
    return el("li", {}, el("a", { href: `#/chain/${n.id}` }, n.summary),
      el("span", { class: "muted" }, ` · ${n.topic || "no topic"} · ${when(n.created_at)}`));
  }

  let chainLink = null;
  async function chainView(args) {
    let link = null;
    if (args[0]) link = await get(`/narratives/${Number(args[0])}`);
    else link = (await get("/narratives/latest")).narrative;
    chainLink = link;
    if (!link) {
      $("chain-link").hidden = true;
      fill("chain-earlier");
      fill("chain-later");
      say("No narrative links yet.");
      return;
    }
    const [back, forward] = await Promise.all([
      get(`/narratives/${link.id}/back?depth=8`), get(`/narratives/${link.id}/forward?depth=8`),
    ]);
    $("chain-link").hidden = false;
    fill("chain-summary", link.summary);
    fill("chain-about", `link #${link.id} · ${link.topic || "no topic"} · ${link.sealed ? "sealed" : "running"} · ` +
      `${when(link.created_at)}${link.storyline_id ? " · " + M.storylineName(link.storyline_id) : ""}`);
    const memories = await Promise.all(link.memory_ids.slice(0, 20).map((id) => get(`/memories/${id}`)
      .catch(() => ({ id, content: `memory #${id} (deleted)` }))));
    fill("chain-memories", memories.length ? memories.map((m) => el("li", {}, m.content, " ",
      el("a", { href: `#/influence/memory/${m.id}`, "aria-label": `influence of memory ${m.id}` }, `#${m.id}`)))
      : [el("li", { class: "muted" }, "no memories")]);
    const earlier = back.items.slice(1);
    const later = forward.items.filter((n) => n.id !== link.id);
    fill("chain-earlier", earlier.length ? earlier.map(linkItem) : [el("li", { class: "muted" }, "start of the thread")]);
    fill("chain-later", later.length ? later.map(linkItem) : [el("li", { class: "muted" }, "nothing later yet")]);
    $("chain-back").disabled = !earlier.length;
    $("chain-forward").disabled = !later.length;
    chainLink.next = later.length ? later[0].id : null;
  }

  function wireChain() {
    $("chain-back").addEventListener("click", () => {
      if (chainLink && chainLink.previous_narrative_id) location.hash = `#/chain/${chainLink.previous_narrative_id}`;
    });
    $("chain-forward").addEventListener("click", () => {
      if (chainLink && chainLink.next) location.hash = `#/chain/${chainLink.next}`;
    });
    $("chain-latest").addEventListener("click", () => { location.hash = "#/chain"; });
    $("chain-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      const q = $("chain-query").value.trim();
      if (!q) return;
      try {
        const found = await get(`/narratives/search?q=${encodeURIComponent(q)}`);
        fill("chain-found-title", `Links mentioning “${q}”`);
        $("chain-found-box").hidden = false;
        fill("chain-found", found.items.length ? found.items.map(linkItem)
          : [el("li", { class: "muted" }, "No link mentions that.")]);
      } catch (error) { failed(error); }
    });
  }

  /* ================= search with why ================= */

  function whyList(why) {
    const rows = [
      ["keyword rank", why.bm25_rank ?? "—"],
      ["vector rank", why.vector_rank === null || why.vector_rank === undefined ? "—"
        : `${why.vector_rank} (cosine ${why.similarity})`],
      ["fused (RRF)", why.fused],
      ["recency", why.recency_to && why.recency_to !== "now" ? `${why.recency} (near ${why.recency_to})` : why.recency],
      ["weights", `semantic ${why.semantic_weight} · recency ${why.recency_weight}`], ["score", why.score],
    ];
    return el("details", { class: "why" }, el("summary", {}, `Why: ${why.summary}`),
      el("dl", {}, rows.flatMap(([term, value]) => [el("dt", {}, term), el("dd", {}, String(value))])));
  }

  async function searchView(_args, query) {
    const q = query.get("q");
    const mode = query.get("mode") || "hybrid";
    $("search-mode").value = mode;
    if (!q) {
      fill("search-results");
      fill("search-count", "");
      return;
    }
    $("search-query").value = q;
    const found = await get(`/search?q=${encodeURIComponent(q)}&mode=${encodeURIComponent(mode)}&k=20`);
    fill("search-count", `${found.items.length} memories for “${q}”`);
    fill("search-results", found.items.map((hit) => memoryItem({ ...hit, shown_text: hit.text },
      { editable: true }, whyList(hit.why))));
  }

  function wireSearch() {
    $("search-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const q = $("search-query").value.trim();
      if (q) location.hash = `#/search?q=${encodeURIComponent(q)}&mode=${encodeURIComponent($("search-mode").value)}`;
    });
  }

  /* ================= influence: explain a use ================= */

  let usesShown = 20;
  async function influenceView(args) {
    const uses = await get(`/uses?limit=${usesShown}`);
    fill("use-list", uses.items.length ? uses.items.map((u) => el("li", {},
      el("a", { href: `#/influence/${u.id}`, "aria-current": args[0] === String(u.id) ? "page" : null },
        `${u.kind}: ${u.query}`),
      el("span", { class: "muted" }, ` · ${(u.references || []).length} memories · ${when(u.created_at)}`)))
      : [el("li", { class: "muted" }, "Memory has not been used yet.")]);
    $("use-more").hidden = uses.next_offset === null;
    if (args[0] === "memory") return memoryInfluence(Number(args[1]));
    const id = args[0] ? Number(args[0]) : uses.items.length ? uses.items[0].id : null;
    if (id === null) { $("use").hidden = true; return; }
    const data = await get(`/uses/${id}`);
    const use = data.use || data;
    $("use").hidden = false;
    fill("use-title", `${use.kind}: “${use.query}”`);
    fill("use-about", [`use #${use.id} · ${when(use.created_at)}${use.outcome ? " · outcome: " + use.outcome : ""}`,
      data.summary ? el("br") : null, data.summary || null,
      ...(data.outcomes || []).map((o) => [el("br"), `outcome #${o.use_id}: ${o.outcome}`,
        o.correction ? ` — ${o.correction}` : ""])]);
    fill("use-refs-title", "Memories that shaped it");
    const refs = data.memories || data.references || use.references || [];
    fill("use-refs", refs.length ? refs.map(referenceItem) : [el("li", { class: "muted" }, "No memories were used.")]);
    return `Why: ${use.query}`;
  }

  function referenceItem(r) {
    const m = r.memory || { id: r.memory_id, content: r.content ?? `memory #${r.memory_id}`, stream: r.stream,
      importance: r.importance, created_at: r.created_at, conversation_id: r.conversation_id,
      narrative_id: r.narrative_id };
    const kind = (r.influence_type || "").replace(/_/g, " ");
    const reasoning = r.reasoning ?? r.why;
    const sources = (r.messages || []).map((msg) => el("li", {},
      `${msg.speaker || msg.role} (message #${msg.message_id}, position ${msg.position}): ${msg.text}`));
    return memoryItem(m, {},
      el("p", { class: "influence" }, el("strong", {}, kind), ` · score ${Number(r.score ?? 0).toFixed(3)}`,
        r.rank ? ` · rank ${r.rank}` : "", r.storyline ? ` · ${r.storyline.name}` : "",
        reasoning ? el("span", {}, ` — ${reasoning}`) : null),
      sources.length ? el("details", { class: "why" }, el("summary", {}, `From ${sources.length} message(s)`),
        el("ul", {}, sources)) : null);
  }

  async function memoryInfluence(memoryId) {
    const [memory, data] = await Promise.all([get(`/memories/${memoryId}`), get(`/memories/${memoryId}/influence`)]);
    $("use").hidden = false;
    fill("use-title", `Memory #${memory.id}`);
    fill("use-about", memory.content);
    fill("use-refs-title", "Uses it shaped");
    fill("use-refs", data.uses.length ? data.uses.map((u) => el("li", {},
      el("a", { href: `#/influence/${u.id}` }, `${u.kind}: ${u.query}`),
      el("span", { class: "muted" }, ` · ${when(u.created_at)}`)))
      : [el("li", { class: "muted" }, "This memory has not shaped anything yet.")]);
  }

  /* ================= history: every change to one memory ================= */

  const EVENT_WORDS = { created: "Stored", edited: "Edited", confirmed: "Confirmed in the review",
    superseded: "Superseded", restored: "Restored", deleted: "Deleted" };

  async function historyView(args) {
    const id = Number(args[0]);
    if (!id) {
      fill("history-title", "History of a memory");
      fill("history-about", "Every change to a memory: stored, edited, confirmed, superseded, restored, deleted.");
      fill("history-events");
      return;
    }
    const data = await get(`/memories/${id}/history`);
    $("history-id").value = String(id);
    fill("history-title", `History of memory #${id}`);
    fill("history-about", data.deleted
      ? "This memory was deleted. Its history keeps what happened and when, and none of its text."
      : ["Now: ", el("q", {}, data.memory.content)]);
    fill("history-events", data.events.map((e, i) => eventItem(e, i ? data.events[i - 1] : null)));
    return `History of memory #${id}`;
  }

  /* One event; a text the event before already shows is not repeated. */
  function eventItem(e, before) {
    const detail = Object.entries(e.detail || {}).map(([k, v]) =>
      k === "conversation_id" ? el("a", { href: `#/archive/${v}` }, `conversation #${v}`)
        : k === "superseded_by" ? el("a", { href: `#/history/${v}` }, `by memory #${v}`)
          : `${k.replace(/_/g, " ")}: ${Array.isArray(v) ? v.join(", ") : v}`);
    const text = [];
    if (e.old_text && e.old_text !== e.new_text) text.push(el("p", { class: "old" }, el("del", {}, e.old_text)));
    if (e.new_text && (e.old_text || !before || before.new_text !== e.new_text)) {
      text.push(el("p", { class: "new" }, e.new_text));
    } else if (e.new_text) text.push(el("p", { class: "muted" }, "(the text above, unchanged)"));
    if (!e.old_text && !e.new_text && e.kind !== "deleted") text.push(el("p", { class: "muted" }, "(text deleted)"));
    return el("li", { class: `event ${e.kind}` },
      el("p", { class: "meta" }, el("strong", {}, EVENT_WORDS[e.kind] || e.kind), " · ",
        el("time", { datetime: e.created_at }, when(e.created_at)),
        ...detail.flatMap((d) => [" · ", d])),
      ...text);
  }

  $("history-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const id = Number($("history-id").value);
    if (id > 0) location.hash = `#/history/${id}`;
  });
  $("use-more").addEventListener("click", () => { usesShown += 20; N.dispatch(); });
  $("storyline-earlier").addEventListener("click", () => loadStoryPage().catch(failed));

  route("story", storyView);
  route("conversations", conversationsView);
  route("threads", threadsView);
  route("archive", archiveView);
  route("chain", chainView);
  route("search", searchView);
  route("influence", influenceView);
  route("history", historyView);
  wireRename();
  wireConversations();
  wireChain();
  wireSearch();
  N.start();
})();
