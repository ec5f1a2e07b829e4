"""Search-QA (the Search-R1 setting): questions answered with a search engine, `<search>` turns and an `<answer>`."""
