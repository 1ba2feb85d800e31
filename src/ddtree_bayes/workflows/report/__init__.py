"""The report of one fit: compute a summary (numbers) first, render it (HTML, markdown, figures) second."""
