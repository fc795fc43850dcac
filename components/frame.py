"""Make sure a page runs inside app.py's frame (navigation, wide layout, sidebar).

Streamlit keeps a legacy mode for apps with a `pages/` folder: until some
session has run app.py (whose `st.navigation` turns that mode off for the whole
server), a first request for `/clusters` runs `pages/clusters.py` on its own —
without the app's layout and navigation. A deep link opened right after the
server started would hit exactly that. Every page calls it first, through
`components.data.open_page`: in legacy mode it turns the mode off, as
`st.navigation` itself does, and reruns, so the same page (same URL path and
query) runs through app.py. The private flag it flips is checked by
tests/test_app.py, the behaviour by tests/test_browser.py (a fresh server).
"""

from __future__ import annotations

import streamlit as st


def ensure_app_frame() -> None:
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a Streamlit without the legacy mode
        return
    if getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
        st.rerun()


# The browser's own address (read when the button is pressed, so it holds every choice made
# since the page was drawn). navigator.clipboard needs a secure context (HTTPS, localhost);
# elsewhere the textarea fallback copies, and if both fail the link is shown to copy by hand.
_COPY_LINK = """
<style>
  body { margin: 0; font-family: "Source Sans Pro", "Source Sans 3", sans-serif; }
  button { display: inline-flex; align-items: center; gap: 6px; padding: 4px 12px;
           font: inherit; font-size: 14px; color: rgb(49, 51, 63); background: white;
           border: 1px solid rgba(49, 51, 63, 0.2); border-radius: 8px; cursor: pointer; }
  button:hover { border-color: #2f6fde; color: #2f6fde; }
  #status { font-size: 12px; color: rgb(100, 102, 110); margin-left: 6px; word-break: break-all; }
</style>
<button id="copy" type="button" title="Copy a link to this view (every choice on the page is in it)">
  <svg width="14" height="14" viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="
    M3.9 12a3.1 3.1 0 0 1 3.1-3.1h4V7H7a5 5 0 0 0 0 10h4v-1.9H7A3.1 3.1 0 0 1 3.9 12zM8 13h8v-2H8v2z
    m9-6h-4v1.9h4a3.1 3.1 0 0 1 0 6.2h-4V17h4a5 5 0 0 0 0-10z"/></svg>
  Copy link
</button><span id="status" role="status"></span>
<script>
  const button = document.getElementById("copy");
  const status = document.getElementById("status");
  button.addEventListener("click", async () => {
    const url = window.parent.location.href;
    let copied = false;
    try { await navigator.clipboard.writeText(url); copied = true; } catch (e) {}
    if (!copied) {
      const area = document.createElement("textarea");
      area.value = url;
      document.body.appendChild(area);
      area.select();
      try { copied = document.execCommand("copy"); } catch (e) {}
      area.remove();
    }
    button.dataset.link = url;
    status.textContent = copied ? "Copied" : url;
  });
</script>
"""


def copy_link() -> None:
    """A "Copy link" button: the address of the view on screen, to share or bookmark."""
    st.iframe(_COPY_LINK, height=40)


def sidebar_tools() -> None:
    """What the app's frame shows on every page, below the navigation."""
    from conceptlens.workspace import read_only

    copy_link()
    if read_only():
        st.caption("Read-only deployment: nothing here changes the workspace.")
