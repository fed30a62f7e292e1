"""report.html's static script and style sheet (tasks/reporting/html.py writes the page).

The script is static — no data is ever interpolated into it — and the page's
Content-Security-Policy allows it by its hash alone.
"""

SCRIPT = r"""
(function () {
  "use strict";
  var form = document.getElementById("filters");
  if (!form) return;
  form.hidden = false;
  document.body.classList.add("js");
  var label = document.getElementById("f-label");
  var text = document.getElementById("f-text");
  var count = document.getElementById("f-count");
  var metas = Array.prototype.slice.call(form.querySelectorAll("select[data-key]"));
  var uncertain = document.getElementById("f-uncertain");
  var claims = Array.prototype.slice.call(document.querySelectorAll("li.claim"));
  var cards = Array.prototype.slice.call(document.querySelectorAll("article.q"));
  var hay = new Map();
  claims.forEach(function (li) {
    var card = li.closest("article.q");
    var head = card.querySelector("header").textContent + " " + card.querySelector(".answer").textContent;
    hay.set(li, (li.textContent + " " + head).toLowerCase());
  });
  function apply() {
    var want = label.value, q = text.value.trim().toLowerCase(), shown = 0;
    claims.forEach(function (li) {
      var ok = (!want || li.getAttribute("data-label") === want) &&
        (!uncertain.checked || li.getAttribute("data-uncertain") === "1") &&
        metas.every(function (s) { return !s.value || li.getAttribute("data-" + s.getAttribute("data-key")) === s.value; }) &&
        (!q || hay.get(li).indexOf(q) >= 0);
      li.hidden = !ok;
      if (ok) shown += 1;
    });
    cards.forEach(function (card) { card.hidden = !card.querySelector("li.claim:not([hidden])"); });
    count.textContent = shown + " of " + claims.length + " claims shown";
  }
  form.addEventListener("input", apply);
  form.addEventListener("change", apply);
  form.addEventListener("reset", function () { setTimeout(apply, 0); });
  form.addEventListener("submit", function (e) { e.preventDefault(); });
  Array.prototype.forEach.call(document.querySelectorAll("a.to-label"), function (a) {
    a.addEventListener("click", function () { label.value = a.getAttribute("data-label"); apply(); });
  });
  apply();
})();
"""

CSS = """
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1100px;margin:1.5em auto;
padding:0 1em;color:#222}
h1{margin-bottom:0}h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:1.6em}
nav a{margin-right:1em}table{border-collapse:collapse}td,th{padding:2px 8px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}table.grid td,table.grid th{border-bottom:1px solid #eee}
table.head td{border-bottom:1px solid #eee}.ci{color:#555}.big{font-size:17px}.note,.sub{color:#555;font-size:13px}
.warn{background:#fff3cd;padding:4px 8px}dl.manifest{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;
font-size:13px}dl.manifest dt{color:#555}dl.manifest dd{margin:0}code{font-size:12px;background:#f3f3f3;padding:0 3px}
.lab{color:#fff;border-radius:3px;padding:0 6px;font-size:12px;text-decoration:none;white-space:nowrap}
.flag{background:#000;color:#fff;border-radius:3px;padding:0 6px;font-size:12px}
.flag.unc{background:#8d6e00}.prob{color:#555;font-size:12px}
figure.chart{margin:1em 0}figure.chart svg{max-width:100%;height:auto}figcaption{color:#555;font-size:13px}
article.q{border:1px solid #ddd;border-radius:6px;padding:4px 14px;margin:14px 0}
article.q h3{margin:6px 0}.qid{font-family:monospace;color:#555;margin-right:6px}.meta{color:#555;font-size:13px;margin:0}
.answer p{margin:2px 0}.k{color:#777;font-size:12px;text-transform:uppercase;letter-spacing:.04em;margin:6px 0 0}
a.as{color:inherit;text-decoration:none;border-bottom:2px solid;padding:1px 0}
.mk-unsupported{text-decoration:underline wavy #c0392b;text-decoration-skip-ink:none}
.mk-contradicted{text-decoration:line-through 2px #c0392b;background:#c0392b22}
p.marks{margin:2px 0;font-size:.9em}div.ev.contra{border-left:3px solid #c0392b}mark.contra{background:#f5b7b1}
ol.claims{padding-left:1.4em}li.claim{margin:10px 0}.ctext{margin:0}.why{color:#555;font-size:13px;margin:2px 0}
.src{color:#555;font-size:13px;margin:4px 0 0}.decides-tag{color:#000}
pre.doc{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;padding:6px 8px;border-left:3px solid #bbb;
margin:2px 0 6px;font:13px/1.45 ui-monospace,SFMono-Regular,Menlo,monospace}
div.ev.decides pre.doc{border-left-color:#333}mark.ev{background:#ffe082;padding:0 1px}
mark.ev.decides{background:#ffd54f;outline:2px solid #333}.more{margin-left:1em}.none{color:#777;font-style:italic}
form.filters{position:sticky;top:0;background:#fff;padding:8px 0;border-bottom:1px solid #ddd;display:flex;
flex-wrap:wrap;gap:6px 14px;align-items:center;z-index:1}[hidden]{display:none!important}
"""
