# provstream — every target installs the project into .venv first if needed.
SHELL := /bin/bash
VENV  := .venv
BIN   := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: up down status test unit demo bench faults faults-fuzz lint clean-stack stack-tests secure-tests erase-tests bulk-tests peer-bench

# setup.py builds the C extensions in place (provstream/codec/*.c, *.h, connectors/neo4j/*.c): a changed
# source rebuilds them.
$(STAMP): pyproject.toml setup.py scripts/bootstrap $(wildcard provstream/codec/*.c provstream/codec/*.h) \
          $(wildcard connectors/neo4j/*.c)
	bash scripts/bootstrap
	touch $(STAMP)

up: $(STAMP)
	$(BIN)/provstream stack up

down:
	@if [ -x $(BIN)/provstream ]; then $(BIN)/provstream stack down; \
	else bash deploy/kafka.sh down; bash deploy/neo4j.sh down; fi

status: $(STAMP)
	$(BIN)/provstream stack status

test: $(STAMP)
	bash scripts/test

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

demo: $(STAMP)
	bash scripts/demo

bench: $(STAMP)
	bash scripts/bench
	bash scripts/bench --brokers 3 --no-replay

# The peer benchmark: the official Neo4j Connector for Kafka vs provstream sink on a private stack
# (bench/peer/neo4j_connector/README.md; PAIRS=1 WARMUP=1 for a quick check). Not part of CI.
peer-bench: $(STAMP)
	bash bench/peer/neo4j_connector/run.sh

faults: $(STAMP)
	bash scripts/faults
	bash scripts/faults-cluster -k "not at_volume"

faults-fuzz: $(STAMP)
	PROVSTREAM_FUZZ_EVENTS=$${PROVSTREAM_FUZZ_EVENTS:-100000} bash scripts/faults-cluster -k at_volume

lint: $(STAMP)
	$(BIN)/ruff check provstream streams connectors tests bench
	bash scripts/typecheck

clean-stack: down
	rm -rf .stack

stack-tests: $(STAMP)
	$(BIN)/pytest -q -m privatestack tests/stack

secure-tests: $(STAMP)
	$(BIN)/pytest -q -m securestack tests/secure

erase-tests: $(STAMP)
	$(BIN)/pytest -q -m privatestack tests/erase

bulk-tests: $(STAMP)
	$(BIN)/pytest -q -m privatestack tests/bulk
