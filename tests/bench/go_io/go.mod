module parataxis/tests/bench/go_io

go 1.19
