"use strict";
// Clicking a node of the fusion graph shows what the report knows of it (the JSON above).
const reportData = JSON.parse(document.getElementById("report-data").textContent);

function element(tag, text, className) {
  const made = document.createElement(tag);
  if (text !== undefined) made.textContent = text;
  if (className) made.className = className;
  return made;
}

function factsTable(node) {
  const rows = [["kind", node.kind], ["calls into", node.routine], ["shape", node.shape],
                ["bytes in", node.bytes_in.toLocaleString()], ["bytes out", node.bytes_out.toLocaleString()],
                ["flops", node.flops.toLocaleString()], ["estimated time", node.estimate],
                ["measured time", node.measured], ["achieved", node.achieved], ["inside", node.where]];
  const table = element("table");
  for (const [name, value] of rows) {
    if (!value) continue;
    const row = table.insertRow();
    row.appendChild(element("th", name));
    row.appendChild(element("td", String(value)));
  }
  return table;
}

function listSection(title, items, empty, className) {
  const section = element("div");
  section.appendChild(element("h4", title + " (" + items.length + ")"));
  if (!items.length) {
    section.appendChild(element("p", empty, "hint"));
    return section;
  }
  const list = element("ul", undefined, className);
  for (const item of items) list.appendChild(element("li", item));
  section.appendChild(list);
  return section;
}

function codeSection(title, text, open) {
  const details = element("details");
  details.open = open;
  details.appendChild(element("summary", title));
  details.appendChild(element("pre", text));
  return details;
}

function showNode(id) {
  const node = reportData.nodes[id];
  const panel = document.getElementById("details");
  if (!node) return;
  panel.replaceChildren(element("h3", node.name), factsTable(node));
  panel.appendChild(listSection("Formed by these fusion decisions", node.formed, "no merge formed it: it is an op of its own", "formed"));
  panel.appendChild(listSection("Merges it did not take", node.refused, "no refused merge names it", "refused"));
  if (node.ops) panel.appendChild(codeSection("Its ops", node.ops, true));
  if (node.source) panel.appendChild(codeSection("Its kernel source (StableHLO, destination-passing style)", node.source, false));
  document.querySelectorAll(".graph g.node.selected").forEach(g => g.classList.remove("selected"));
  const chosen = document.getElementById(id);
  if (chosen) chosen.classList.add("selected");
}

document.querySelectorAll(".graph g.node.thunk").forEach(g => {
  g.addEventListener("click", () => showNode(g.id));
});
