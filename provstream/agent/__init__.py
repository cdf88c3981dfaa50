"""The ReAct agent behind ``tg-invoke-agent``, its tools (DocRAG search over a
bundled corpus, GraphRAG over a tiny knowledge graph, a calculator) and the
bundled data. Entry points: :func:`provstream.agent.run.invoke` and
:func:`provstream.agent.cli.main`.
"""
