module parataxis/tests/bench/go_skynet

go 1.19
